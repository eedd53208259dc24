// The phases of a ckptfs-bench storm and their names on the command line.
//
//   save    every rank writes its files (SaveRank), then rank 0 finishes the
//           checkpoint once (FinalizeSave: dcp's .metadata sequence)
//   commit  every rank calls the ckptfs commit barrier on the step directory
//   load    caches dropped, every rank reads back and verifies its own shard
//   bcast   caches dropped, every rank reads back and verifies rank 0's shard
//
// Thread-safe (pure functions).
#ifndef CKPTFS_BENCH_PHASE_H_
#define CKPTFS_BENCH_PHASE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs::bench {

// In the order a repeat runs them.
enum class Phase { kSave = 0, kCommit = 1, kLoad = 2, kBcast = 3 };
inline constexpr Phase kAllPhases[] = {Phase::kSave, Phase::kCommit, Phase::kLoad, Phase::kBcast};

absl::string_view PhaseName(Phase phase);

// "save,commit,load,bcast" (any subset, any order, no repeats) -> the phases
// in run order. InvalidArgument naming the unknown phase otherwise.
absl::StatusOr<std::vector<Phase>> ParsePhases(absl::string_view list);

// True for the phases that read (load, bcast).
inline bool IsLoadPhase(Phase phase) { return phase == Phase::kLoad || phase == Phase::kBcast; }

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_PHASE_H_
