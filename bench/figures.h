// The figures ckptfs-bench reports, computed from measured timings.
//
// A PhaseRecord holds what one phase of one repeat on one target measured:
// every rank's start, first byte and end (CLOCK_MONOTONIC ns) and bytes, and
// the CPU time spent. ComputeFigures turns it into named figures:
//
//   agg_gbps            bytes / (last end - first start), 1 GB = 1e9 bytes
//   mlperf_duration_s   MLPerf Storage: the slowest rank's time
//   mlperf_gbps         MLPerf Storage: bytes / mlperf_duration_s
//   rank_p50_s/p99_s    percentiles of the ranks' times (nearest rank)
//   commit_*            commit phase: the ranks' barrier latency, and
//                       release_s = last return - last arrival
//   ttfb_p50_s/max_s    load phases: start to first byte
//   *_cpu_s, *_per_gib  CPU seconds of the ranks / target processes
//   verified_bytes      load phases: bytes read and checked
//   disk_busy_pct       the measured disk's busy time / the storm's wall
//                       time (capped at 100); disk_write_gbps on saves and
//                       disk_read_gbps on loads: its bytes / wall time
//
// Thread-safe (pure functions).
#ifndef CKPTFS_BENCH_FIGURES_H_
#define CKPTFS_BENCH_FIGURES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "bench/disk.h"
#include "bench/phase.h"
#include "bench/workload.h"

namespace ckptfs::bench {

struct RankRecord {
  int rank = 0;
  RankTimes times;
};

struct PhaseRecord {
  std::string target;  // "A" or "B"
  int repeat = 0;      // 0-based
  Phase phase = Phase::kSave;
  std::vector<RankRecord> ranks;       // in rank order
  double rank_cpu_s = 0;               // user + system
  double rank_system_cpu_s = 0;        // of that, in the kernel (a plain directory's write path)
  std::optional<double> target_cpu_s;  // none: no target process known
  uint64_t verified_bytes = 0;         // load phases
  std::optional<DiskUse> disk;         // none: no disk measured
};

struct Figure {
  std::string key;
  double value = 0;
};
using Figures = std::vector<Figure>;

// What a figure key means, for tables and JSON.
struct FigureInfo {
  absl::string_view key;
  absl::string_view label;  // for people, with the unit
  bool higher_is_better;
  int decimals;  // in the table
};
// Every figure, in the order tables list them.
const std::vector<FigureInfo>& FigureCatalogue();
// nullptr for an unknown key.
const FigureInfo* FindFigureInfo(absl::string_view key);

// The figures of one phase (only those that apply to it, in catalogue
// order). A record without ranks yields no figures.
Figures ComputeFigures(const PhaseRecord& record);
std::optional<double> FindFigure(const Figures& figures, absl::string_view key);

// Nearest-rank percentile: the smallest value with at least p% of the values
// at or below it. REQUIRES: values non-empty, 0 < p <= 100.
double Percentile(std::vector<double> values, double p);
// The middle value (mean of the two middle ones for an even count).
// REQUIRES: values non-empty.
double Median(std::vector<double> values);
// Median of a[i] / b[i] over the pairs where b[i] != 0; none if no pair.
std::optional<double> MedianOfRatios(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_FIGURES_H_
