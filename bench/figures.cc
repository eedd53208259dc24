// See figures.h.
#include "bench/figures.h"

#include <algorithm>
#include <cmath>

namespace ckptfs::bench {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

const std::vector<FigureInfo>& FigureCatalogue() {
  static const std::vector<FigureInfo> catalogue = {
      {"agg_gbps", "aggregate GB/s", true, 3},
      {"mlperf_gbps", "MLPerf throughput GB/s", true, 3},
      {"mlperf_duration_s", "MLPerf duration s (slowest rank)", false, 3},
      {"rank_p50_s", "rank time p50 s", false, 3},
      {"rank_p99_s", "rank time p99 s", false, 3},
      {"commit_p50_s", "commit latency p50 s", false, 4},
      {"commit_p99_s", "commit latency p99 s", false, 4},
      {"commit_max_s", "commit latency max s", false, 4},
      {"commit_release_s", "commit release s (last arrival to last return)", false, 4},
      {"ttfb_p50_s", "time to first byte p50 s", false, 4},
      {"ttfb_max_s", "time to first byte max s", false, 4},
      {"rank_cpu_s_per_gib", "rank CPU s/GiB", false, 3},
      {"rank_system_cpu_s_per_gib", "rank kernel CPU s/GiB", false, 3},
      {"target_cpu_s_per_gib", "target CPU s/GiB", false, 3},
      {"rank_cpu_s", "rank CPU s", false, 3},
      {"rank_system_cpu_s", "rank kernel CPU s", false, 3},
      {"target_cpu_s", "target CPU s", false, 3},
      // The disk figures describe a run rather than rank it; "higher is
      // better" is false for them all.
      {"disk_busy_pct", "disk busy %", false, 0},
      {"disk_write_gbps", "disk write GB/s", false, 3},
      {"disk_read_gbps", "disk read GB/s", false, 3},
      {"wall_s", "wall s (first start to last end)", false, 3},
      {"bytes", "bytes", true, 0},
      {"verified_bytes", "bytes verified", true, 0},
  };
  return catalogue;
}

const FigureInfo* FindFigureInfo(absl::string_view key) {
  for (const FigureInfo& info : FigureCatalogue()) {
    if (info.key == key) return &info;
  }
  return nullptr;
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  if (index >= values.size()) index = values.size() - 1;
  return values[index];
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

std::optional<double> MedianOfRatios(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (b[i] != 0) ratios.push_back(a[i] / b[i]);
  }
  if (ratios.empty()) return std::nullopt;
  return Median(ratios);
}

std::optional<double> FindFigure(const Figures& figures, absl::string_view key) {
  for (const Figure& figure : figures) {
    if (figure.key == key) return figure.value;
  }
  return std::nullopt;
}

Figures ComputeFigures(const PhaseRecord& record) {
  if (record.ranks.empty()) return {};
  int64_t first_start = record.ranks[0].times.start_ns;
  int64_t last_start = first_start;
  int64_t last_end = record.ranks[0].times.end_ns;
  uint64_t bytes = 0;
  std::vector<double> rank_s, ttfb_s;
  for (const RankRecord& r : record.ranks) {
    first_start = std::min(first_start, r.times.start_ns);
    last_start = std::max(last_start, r.times.start_ns);
    last_end = std::max(last_end, r.times.end_ns);
    bytes += r.times.bytes;
    rank_s.push_back(Seconds(r.times.end_ns - r.times.start_ns));
    if (r.times.first_byte_ns != 0)
      ttfb_s.push_back(Seconds(r.times.first_byte_ns - r.times.start_ns));
  }
  const double wall = Seconds(last_end - first_start);
  const double slowest = *std::max_element(rank_s.begin(), rank_s.end());
  const double gib = static_cast<double>(bytes) / kGiB;

  // Collected by key, then emitted in catalogue order.
  Figures raw;
  auto add = [&raw](absl::string_view key, double value) {
    raw.push_back(Figure{std::string(key), value});
  };
  if (record.phase == Phase::kCommit) {
    add("commit_p50_s", Percentile(rank_s, 50));
    add("commit_p99_s", Percentile(rank_s, 99));
    add("commit_max_s", slowest);
    add("commit_release_s", Seconds(last_end - last_start));
  } else {
    if (wall > 0) add("agg_gbps", static_cast<double>(bytes) / wall / 1e9);
    if (slowest > 0) add("mlperf_gbps", static_cast<double>(bytes) / slowest / 1e9);
    add("mlperf_duration_s", slowest);
    add("rank_p50_s", Percentile(rank_s, 50));
    add("rank_p99_s", Percentile(rank_s, 99));
    add("bytes", static_cast<double>(bytes));
  }
  if (IsLoadPhase(record.phase)) {
    if (!ttfb_s.empty()) {
      add("ttfb_p50_s", Percentile(ttfb_s, 50));
      add("ttfb_max_s", *std::max_element(ttfb_s.begin(), ttfb_s.end()));
    }
    add("verified_bytes", static_cast<double>(record.verified_bytes));
  }
  add("rank_cpu_s", record.rank_cpu_s);
  add("rank_system_cpu_s", record.rank_system_cpu_s);
  if (bytes > 0) {
    add("rank_cpu_s_per_gib", record.rank_cpu_s / gib);
    add("rank_system_cpu_s_per_gib", record.rank_system_cpu_s / gib);
  }
  if (record.target_cpu_s.has_value()) {
    add("target_cpu_s", *record.target_cpu_s);
    if (bytes > 0) add("target_cpu_s_per_gib", *record.target_cpu_s / gib);
  }
  if (record.disk.has_value() && record.phase != Phase::kCommit && wall > 0) {
    add("disk_busy_pct", std::min(100.0, record.disk->busy_s / wall * 100.0));
    if (record.phase == Phase::kSave) {
      add("disk_write_gbps", static_cast<double>(record.disk->written_bytes) / wall / 1e9);
    } else {
      add("disk_read_gbps", static_cast<double>(record.disk->read_bytes) / wall / 1e9);
    }
  }
  add("wall_s", wall);

  Figures ordered;
  for (const FigureInfo& info : FigureCatalogue()) {
    for (const Figure& figure : raw) {
      if (figure.key == info.key) ordered.push_back(figure);
    }
  }
  return ordered;
}

}  // namespace ckptfs::bench
