// The summary of a ckptfs-bench run: every figure's per-repeat values on
// each target, their medians, and the median of the per-repeat ratios A/B;
// and the table printed at the end of a run (ratios first when there is a
// baseline, since on a noisy machine they are what holds).
//
// Thread-safety: pure functions.
#ifndef CKPTFS_BENCH_SUMMARY_H_
#define CKPTFS_BENCH_SUMMARY_H_

#include <optional>
#include <string>
#include <vector>

#include "bench/figures.h"
#include "bench/options.h"
#include "bench/runner.h"

namespace ckptfs::bench {

struct SummaryRow {
  Phase phase = Phase::kSave;
  std::string key;  // a FigureCatalogue key
  // Per repeat (index = repeat); none where the figure was not measured.
  std::vector<std::optional<double>> a, b;
  std::optional<double> median_a, median_b;
  std::optional<double> ratio;  // median over repeats of a[i] / b[i]
};

// Rows in phase order, then catalogue order; only figures measured at
// least once on A or B.
std::vector<SummaryRow> Summarize(const std::vector<PhaseRecord>& records, int repeats);

// The table and the lines above it (workload, targets, commit, notes).
std::string FormatSummary(const BenchOptions& options, const BenchResult& result);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_SUMMARY_H_
