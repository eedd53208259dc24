// BarrierStorm: the scale benchmark of the synchronized-commit barrier. N ranks
// declare one checkpoint and commit it, every commit sent at once as an
// asynchronous gRPC call, so that one process stands in for thousands of ranks
// without a thread each; it measures what the barrier costs once the last rank
// has arrived: the time from the last arrival (the last commit sent) to each
// rank's release (the reply of its client's long poll). Ranks are grouped K to
// a simulated client, as ranks on one node share a mount: one long poll per
// client, the others' commits no_wait arrivals (the protocol of
// client/commit_coalescer.h).
//
// Thread-safety: RunBarrierStorm is called from one thread; it uses gRPC's
// callback threads internally and returns when every call has finished.
#ifndef CKPTFS_BENCH_BARRIER_STORM_H_
#define CKPTFS_BENCH_BARRIER_STORM_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace ckptfs::bench {

struct BarrierStormOptions {
  std::string meta_address;  // host:port of a running ckptfs-meta
  uint32_t ranks = 1024;
  // Empty files each rank creates (and closes) in the checkpoint before the
  // storm, so that the commit verifies a real file list.
  uint32_t files_per_rank = 1;
  // gRPC channels the commits are spread over (as ranks of many nodes).
  int channels = 16;
  // Ranks per simulated client (mount), K consecutive ranks each, sharing
  // one channel: the first rank of a client sends the long poll, the other
  // K-1 send no_wait arrivals, as client/commit_coalescer.h does. 1: every
  // rank a client of its own with its own long poll.
  uint32_t ranks_per_client = 8;
  std::string name;  // the checkpoint directory, created under the root
  // Called once the files exist, just before the declare (e.g. to sample
  // the service's CPU time so that setup is not counted). May be empty.
  std::function<void()> before_declare;
};

struct BarrierStormResult {
  uint32_t ranks = 0;
  uint32_t ranks_per_client = 0;
  uint32_t long_polls = 0;  // one per client
  double declare_s = 0;
  double arrivals_s = 0;  // first commit sent .. last commit sent
  // From the last commit sent to each rank's release: the reply of its
  // client's long poll.
  double release_p50_s = 0;
  double release_p99_s = 0;
  double release_max_s = 0;
};

// Creates the checkpoint directory and its files, declares it, sends every
// rank's commit and waits for all replies; an error if a long poll did not
// return COMMITTED or a no_wait arrival failed.
absl::StatusOr<BarrierStormResult> RunBarrierStorm(const BarrierStormOptions& options);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_BARRIER_STORM_H_
