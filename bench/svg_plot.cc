// See svg_plot.h.
#include "bench/svg_plot.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ckptfs::bench {
namespace {

constexpr double kWidth = 1100, kLeft = 70, kRight = 20, kTop = 50;
constexpr double kChartHeight = 220;

const char* PhaseColor(Phase phase) {
  switch (phase) {
    case Phase::kSave:
      return "#d62728";
    case Phase::kCommit:
      return "#9467bd";
    case Phase::kLoad:
      return "#1f77b4";
    case Phase::kBcast:
      return "#2ca02c";
  }
  return "#777777";
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" step (1, 2 or 5 times a power of ten) giving about `count` ticks.
double NiceStep(double span, int count) {
  if (span <= 0) return 1;
  const double raw = span / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

}  // namespace

std::string RenderSvg(const BenchResult& result, int ranks, const std::string& title) {
  ranks = std::max(ranks, 1);
  const double span_s = std::max(1e-3, static_cast<double>(result.end_ns - result.start_ns) / 1e9);
  const double plot_w = kWidth - kLeft - kRight;
  const double row_h = std::clamp(560.0 / ranks, 0.5, 14.0);
  const double rows_h = row_h * ranks;
  const double chart_top = kTop + rows_h + 60;
  const double height = chart_top + kChartHeight + 60;
  auto x_of = [&](int64_t ns) {
    return kLeft + plot_w * (static_cast<double>(ns - result.start_ns) / 1e9) / span_s;
  };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, height, kWidth, height);
  absl::StrAppendFormat(&svg, "<text x=\"%.0f\" y=\"18\" font-size=\"14\">%s</text>\n", kLeft,
                        Escape(title));
  // Legend.
  double lx = kLeft;
  for (Phase phase : kAllPhases) {
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%.0f\" y=\"26\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                          "<text x=\"%.0f\" y=\"35\">%s</text>\n",
                          lx, PhaseColor(phase), lx + 14, std::string(PhaseName(phase)));
    lx += 70;
  }
  absl::StrAppendFormat(&svg, "<text x=\"%.0f\" y=\"35\">(baseline B lighter)</text>\n", lx);

  // Time grid shared by both panels.
  const double step = NiceStep(span_s, 10);
  for (double t = 0; t <= span_s + 1e-9; t += step) {
    const double x = kLeft + plot_w * t / span_s;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g s</text>\n",
                          x, kTop, x, chart_top + kChartHeight, x, chart_top + kChartHeight + 16,
                          t);
  }

  // Span labels: target and repeat above the rows.
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> spans;
  for (const PhaseRecord& r : result.records) {
    const std::string name = absl::StrCat(r.target, " ", r.repeat + 1);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const RankRecord& rank : r.ranks) {
      lo = std::min(lo, rank.times.start_ns);
      hi = std::max(hi, rank.times.end_ns);
    }
    if (!spans.empty() && spans.back().first == name) {
      spans.back().second.second = std::max(spans.back().second.second, hi);
    } else {
      spans.push_back({name, {lo, hi}});
    }
  }
  for (const auto& [name, range] : spans) {
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#444\">%s</text>\n",
                          x_of(range.first), kTop - 3, Escape(name));
  }

  // One group per rank.
  if (ranks <= 64) {
    for (int rank = 0; rank < ranks; ++rank) {
      absl::StrAppendFormat(&svg,
                            "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">rank %d</text>\n",
                            kLeft - 4, kTop + row_h * rank + row_h * 0.8, rank);
    }
  } else {
    absl::StrAppendFormat(&svg, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%d ranks</text>\n",
                          kLeft - 4, kTop + rows_h / 2, ranks);
  }
  // Each rank's bars, in the order they ran.
  std::vector<std::vector<std::pair<const PhaseRecord*, const RankRecord*>>> by_rank(ranks);
  for (const PhaseRecord& r : result.records) {
    for (const RankRecord& rr : r.ranks) {
      if (rr.rank >= 0 && rr.rank < ranks) by_rank[rr.rank].push_back({&r, &rr});
    }
  }
  for (int rank = 0; rank < ranks; ++rank) {
    absl::StrAppendFormat(&svg, "<g class=\"rank\" id=\"rank-%d\">", rank);
    const double y = kTop + row_h * rank;
    for (const auto& [record, rank_record] : by_rank[rank]) {
      {
        const PhaseRecord& r = *record;
        const RankRecord& rr = *rank_record;
        const double x0 = x_of(rr.times.start_ns);
        const double w = std::max(0.5, x_of(rr.times.end_ns) - x0);
        absl::StrAppendFormat(&svg,
                              "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                              "fill=\"%s\" fill-opacity=\"%s\"><title>%s %s repeat %d rank %d: "
                              "%.3f s</title></rect>",
                              x0, y + row_h * 0.1, w, row_h * 0.8, PhaseColor(r.phase),
                              r.target == "B" ? "0.45" : "0.95", r.target,
                              std::string(PhaseName(r.phase)), r.repeat + 1, rank,
                              static_cast<double>(rr.times.end_ns - rr.times.start_ns) / 1e9);
      }
    }
    svg += "</g>\n";
  }

  // Throughput panel: GB/s over the last ~100 ms of each segment (single
  // 50 ms samples are jagged: ranks report in batches).
  struct Rate {
    int segment;
    double x, gbps;
  };
  constexpr int64_t kWindowNs = 100'000'000;
  std::vector<Rate> rates;
  double max_gbps = 0;
  size_t window_start = 0;
  for (size_t i = 1; i < result.points.size(); ++i) {
    const ProgressPoint& cur = result.points[i];
    if (result.points[window_start].segment != cur.segment) window_start = i;
    while (window_start + 1 < i && result.points[window_start + 1].t_ns <= cur.t_ns - kWindowNs) {
      ++window_start;
    }
    const ProgressPoint& from = result.points[window_start];
    if (from.segment != cur.segment || cur.t_ns - from.t_ns < 10'000'000) continue;
    const double gbps = static_cast<double>(cur.bytes - std::min(cur.bytes, from.bytes)) /
                        static_cast<double>(cur.t_ns - from.t_ns);  // bytes/ns = GB/s
    rates.push_back(Rate{cur.segment, x_of(cur.t_ns), gbps});
    max_gbps = std::max(max_gbps, gbps);
  }
  const double y_max = max_gbps > 0 ? NiceStep(max_gbps, 4) * 4 : 1;
  auto y_of = [&](double gbps) { return chart_top + kChartHeight * (1 - gbps / y_max); };
  absl::StrAppendFormat(&svg, "<text x=\"%.0f\" y=\"%.0f\">aggregate throughput, GB/s</text>\n",
                        kLeft, chart_top - 8);
  for (int k = 0; k <= 4; ++k) {
    const double v = y_max * k / 4;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                          kLeft, y_of(v), kLeft + plot_w, y_of(v), kLeft - 4, y_of(v) + 4, v);
  }
  svg += "<g class=\"throughput\">\n";
  for (size_t s = 0; s < result.segments.size(); ++s) {
    std::string points;
    for (const Rate& r : rates) {
      if (r.segment == static_cast<int>(s))
        absl::StrAppendFormat(&points, "%.1f,%.1f ", r.x, y_of(r.gbps));
    }
    if (points.empty()) continue;
    const ProgressSegment& seg = result.segments[s];
    absl::StrAppendFormat(&svg,
                          "<polyline fill=\"none\" stroke=\"%s\" stroke-opacity=\"%s\" "
                          "stroke-width=\"1.5\" points=\"%s\"/>\n",
                          PhaseColor(seg.phase), seg.target == "B" ? "0.45" : "1", points);
  }
  svg += "</g>\n</svg>\n";
  return svg;
}

}  // namespace ckptfs::bench
