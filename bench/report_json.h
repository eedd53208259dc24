// The --json report of ckptfs-bench: options, targets, notes, every phase of
// every repeat with all its figures and every rank's timeline (seconds from
// the start of the run), the summary (per-repeat values, medians, median
// ratios A/B), and the throughput samples behind the plot.
//
// Thread-safety: pure functions.
#ifndef CKPTFS_BENCH_REPORT_JSON_H_
#define CKPTFS_BENCH_REPORT_JSON_H_

#include <string>

#include "absl/status/status.h"
#include "bench/options.h"
#include "bench/runner.h"

namespace ckptfs::bench {

std::string BenchJson(const BenchOptions& options, const BenchResult& result);

// Writes `text` to `path` (replacing it); an error naming the path.
absl::Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_REPORT_JSON_H_
