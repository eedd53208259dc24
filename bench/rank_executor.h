// RankExecutor: runs one task per rank, all at once, and gathers each rank's
// timings, its progress and its CPU time.
//
// Two kinds:
//   processes  (--dir) each rank is a forked child with its own PosixRankIo,
//              as on a real node; progress and the result come back over a
//              pipe. A child that fails, or dies without a result, ends the
//              run: the others are killed and every child is reaped before
//              Run returns. CPU time: getrusage of the reaped children.
//   threads    (--native) rank tasks run on a pool of threads, each task
//              with its own RankIo from a factory (sharing one Client); the
//              pool is as large as the rank count when all ranks must be in
//              flight together (a barrier). CPU time: this process minus the
//              calling thread (so the Client's own threads count).
//
// Thread-safety: Run is called from one thread at a time; `sample` is called
// on that thread. The task runs in a child process or on pool threads.
#ifndef CKPTFS_BENCH_RANK_EXECUTOR_H_
#define CKPTFS_BENCH_RANK_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/figures.h"
#include "bench/rank_io.h"
#include "bench/workload.h"

namespace ckptfs::bench {

// How often Run reports progress to its caller.
inline constexpr int64_t kSampleIntervalNs = 50'000'000;

// What one rank does. `sink` counts its bytes for the progress bar.
using RankTask = std::function<absl::StatusOr<RankTimes>(int rank, RankIo& io, ProgressSink& sink)>;
// Called about every kSampleIntervalNs with CLOCK_MONOTONIC now, the bytes
// all ranks of this Run have moved so far and how many ranks have ended.
using SampleFn = std::function<void(int64_t now_ns, uint64_t bytes, int ranks_done)>;

struct RankRun {
  std::vector<RankRecord> ranks;  // in the order of the `ranks` argument
  double rank_cpu_s = 0;          // user + system
  double rank_system_cpu_s = 0;   // of that, in the kernel
};

class RankExecutor {
 public:
  virtual ~RankExecutor() = default;

  // Runs `task` for every rank in `ranks` and returns when all have ended.
  // `all_at_once`: every rank must be in flight together (threads: one
  // thread per rank). On failure returns the first rank's error, its message
  // starting "rank R: " (or "rank R died: ..."), with the errno kept.
  // Cancelled when InterruptRequested().
  virtual absl::StatusOr<RankRun> Run(const std::vector<int>& ranks, const RankTask& task,
                                      bool all_at_once, const SampleFn& sample) = 0;

  // A RankIo for the runner's own calls (mkdir, declare, remove), used on
  // the calling thread.
  virtual RankIo& ControlIo() = 0;

  // True when ranks are processes (a rank may _exit without killing us).
  virtual bool ranks_are_processes() const = 0;

  // Processes only: a Run whose ranks have not all ended `seconds` after it
  // began kills them and fails (DeadlineExceeded) naming the ranks still
  // running. 0: no limit. Threads cannot be killed: they ignore this.
  virtual void set_phase_timeout_s(int seconds) { (void)seconds; }
};

// "ranks 3, 5, 9 (3 of 8)", at most 8 listed. For messages.
std::string DescribeRanks(const std::vector<int>& ranks, size_t of);

// Ranks are forked children doing POSIX I/O under `root`.
std::unique_ptr<RankExecutor> MakeProcessExecutor(std::string root);

// Ranks are tasks on up to `threads` threads; `make_io` is called once per
// task (from pool threads, concurrently) and once for ControlIo.
std::unique_ptr<RankExecutor> MakeThreadExecutor(std::function<std::unique_ptr<RankIo>()> make_io,
                                                 int threads);

// CLOCK_MONOTONIC in ns (the clock of RankTimes).
int64_t MonotonicNowNs();

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_RANK_EXECUTOR_H_
