// See summary.h.
#include "bench/summary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/table.h"

namespace ckptfs::bench {
namespace {

std::vector<double> Present(const std::vector<std::optional<double>>& values) {
  std::vector<double> out;
  for (const auto& v : values) {
    if (v.has_value()) out.push_back(*v);
  }
  return out;
}

// Figures only the JSON carries (the table shows their per-GiB forms).
bool InTable(Phase phase, const std::string& key) {
  if (key == "bytes" || key == "wall_s") return false;
  if (phase != Phase::kCommit &&
      (key == "rank_cpu_s" || key == "rank_system_cpu_s" || key == "target_cpu_s")) {
    return false;
  }
  return true;
}

std::string FormatValue(const std::string& key, std::optional<double> value) {
  if (!value.has_value()) return "-";
  if (key == "bytes" || key == "verified_bytes") {
    return tools::FormatBytes(static_cast<uint64_t>(*value));
  }
  const FigureInfo* info = FindFigureInfo(key);
  return absl::StrFormat("%.*f", info != nullptr ? info->decimals : 3, *value);
}

std::string FormatRatio(std::optional<double> ratio) {
  if (!ratio.has_value()) return "-";
  return absl::StrFormat("%.2fx", *ratio);
}

std::string DescribeTarget(const TargetDescription& t) {
  std::string line =
      absl::StrCat("  ", t.label, ": ", t.native ? "native " : "", t.root, " (",
                   t.fs_type.empty() ? "unknown fs" : t.fs_type, "), commit: ", t.commit_note);
  if (!t.target_procs.empty()) {
    absl::StrAppend(
        &line, "\n     target CPU: ",
        t.target_procs_label.empty() ? absl::StrJoin(t.target_procs, ",") : t.target_procs_label);
  }
  return line;
}

}  // namespace

std::vector<SummaryRow> Summarize(const std::vector<PhaseRecord>& records, int repeats) {
  std::vector<SummaryRow> rows;
  for (Phase phase : kAllPhases) {
    for (const FigureInfo& info : FigureCatalogue()) {
      SummaryRow row;
      row.phase = phase;
      row.key = std::string(info.key);
      row.a.resize(repeats);
      row.b.resize(repeats);
      bool any = false;
      for (const PhaseRecord& record : records) {
        if (record.phase != phase || record.repeat < 0 || record.repeat >= repeats) continue;
        std::optional<double> value = FindFigure(ComputeFigures(record), info.key);
        if (!value.has_value()) continue;
        any = true;
        (record.target == "B" ? row.b : row.a)[record.repeat] = value;
      }
      if (!any) continue;
      std::vector<double> a = Present(row.a), b = Present(row.b);
      if (!a.empty()) row.median_a = Median(a);
      if (!b.empty()) row.median_b = Median(b);
      std::vector<double> pa, pb;
      for (int i = 0; i < repeats; ++i) {
        if (row.a[i].has_value() && row.b[i].has_value()) {
          pa.push_back(*row.a[i]);
          pb.push_back(*row.b[i]);
        }
      }
      row.ratio = MedianOfRatios(pa, pb);
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string FormatSummary(const BenchOptions& options, const BenchResult& result) {
  const WorkloadSpec& spec = options.spec;
  std::string text = absl::StrCat(
      "ckptfs-bench: ", WorkloadKindName(spec.kind), " workload",
      options.preset.empty() ? "" : absl::StrCat(", preset ", options.preset, " x", options.scale),
      ", ", spec.ranks, " ranks x ", tools::FormatBytes(spec.bytes_per_rank), " (",
      tools::FormatBytes(spec.bytes_per_rank * static_cast<uint64_t>(spec.ranks)),
      " per storm), io ", tools::FormatBytes(spec.io_size), ", ", options.repeat, " repeat",
      options.repeat == 1 ? "" : "s",
      absl::StrFormat(", %.1f s in all\n",
                      static_cast<double>(result.end_ns - result.start_ns) / 1e9));
  for (const TargetDescription& t : result.targets) absl::StrAppend(&text, DescribeTarget(t), "\n");
  if (!result.disk.empty()) {
    absl::StrAppend(&text, "  disk: ", result.disk, " (", result.disk_reason,
                    "): the disk figures below are its busy time and bytes during each storm\n");
  }
  for (const std::string& note : result.notes) absl::StrAppend(&text, "  note: ", note, "\n");
  absl::StrAppend(&text, "\n");

  const bool baseline = result.targets.size() > 1;
  std::vector<std::vector<std::string>> table;
  if (baseline) {
    table.push_back({"phase", "figure", "A/B (median of ratios)", "A median", "B median"});
  } else {
    table.push_back({"phase", "figure", "median", "min", "max"});
  }
  for (const SummaryRow& row : Summarize(result.records, options.repeat)) {
    if (!InTable(row.phase, row.key)) continue;
    const FigureInfo* info = FindFigureInfo(row.key);
    const std::string label(info != nullptr ? info->label : row.key);
    const std::string phase(PhaseName(row.phase));
    if (baseline) {
      table.push_back({phase, label, FormatRatio(row.ratio), FormatValue(row.key, row.median_a),
                       FormatValue(row.key, row.median_b)});
    } else {
      std::vector<double> a = Present(row.a);
      std::optional<double> lo, hi;
      if (!a.empty()) {
        lo = *std::min_element(a.begin(), a.end());
        hi = *std::max_element(a.begin(), a.end());
      }
      table.push_back({phase, label, FormatValue(row.key, row.median_a), FormatValue(row.key, lo),
                       FormatValue(row.key, hi)});
    }
  }
  absl::StrAppend(&text, tools::FormatTable(table));
  if (baseline) {
    absl::StrAppend(&text,
                    "\nA/B: the median over repeats of A's figure divided by B's (for GB/s, "
                    "above 1x means A is faster;\nfor seconds, below 1x means A is faster).\n");
  }
  return text;
}

}  // namespace ckptfs::bench
