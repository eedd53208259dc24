// The ckptfs-bench runner: opens the targets, runs every repeat's phases
// against each in turn (A B A B ...), and collects per-rank timings, CPU
// time and progress samples.
//
// Each repeat writes a fresh step directory `ckptfs-bench.<pid>/step_<i>`
// under the target and removes it when the repeat ends; the whole
// `ckptfs-bench.<pid>` directory is removed at the end, also after a
// failure. A failing or dying rank ends the run with an error naming the
// target, the phase, the repeat and the rank; a full disk is called so.
//
// Test hook: CKPTFS_BENCH_TEST_DIE_RANK=R (R:signal, R:hang) makes rank R's
// process _exit (SIGKILL itself, stop forever) in the middle of its save,
// for --dir targets only.
//
// Thread-safety: RunBench is called from one thread; it runs ranks as
// rank_executor.h says.
#ifndef CKPTFS_BENCH_RUNNER_H_
#define CKPTFS_BENCH_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/figures.h"
#include "bench/options.h"
#include "bench/progress.h"

namespace ckptfs::bench {

// What the report says about a target.
struct TargetDescription {
  std::string label;  // "A", "B"
  std::string path;   // as given
  std::string root;   // resolved
  bool native = false;
  std::string fs_type;
  bool is_ckptfs = false;
  bool commit = false;  // the commit phase ran here
  std::string commit_note;
  std::vector<std::string> target_procs;  // names or pids
  std::string target_procs_label;         // e.g. "ckptfs-fuse[979] ckptfs-meta[904]"
};

struct BenchResult {
  std::vector<TargetDescription> targets;
  std::vector<PhaseRecord> records;  // in the order they ran
  std::vector<ProgressSegment> segments;
  std::vector<ProgressPoint> points;
  std::vector<std::string> notes;  // things people should know about the run
  // The block device whose figures the phases carry ("" when none) and why
  // it was chosen ("--disk", "holds B's directory", ...).
  std::string disk;
  std::string disk_reason;
  int64_t start_ns = 0;  // CLOCK_MONOTONIC
  int64_t end_ns = 0;
};

// Runs the benchmark `options` describe. Notes are also printed through
// `progress` as they arise.
absl::StatusOr<BenchResult> RunBench(const BenchOptions& options, ProgressMeter& progress);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_RUNNER_H_
