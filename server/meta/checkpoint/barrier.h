// Barrier: the in-memory side of one PENDING checkpoint's commit barrier —
// which ranks arrived, the commits waiting for the outcome, and when the
// barrier times out.
//
// The KV store holds the truth: an arrival is stored (CheckpointStore::
// Arrive) before it counts here, so a Barrier can always be rebuilt from the
// store, which is how a restarted service resumes. A waiting commit is a
// callback, not a thread: the gRPC service passes one that finishes the
// call's reactor, so thousands of ranks wait at the cost of a map entry
// each. Each waiter is a long poll that also ends, PENDING, when its own
// poll deadline passes (the caller then commits again).
//
// Thread-safety: not thread-safe; CheckpointCoordinator guards every Barrier
// with its mutex and runs the callbacks only after releasing it.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_BARRIER_H_
#define CKPTFS_SERVER_META_CHECKPOINT_BARRIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/meta.pb.h"

namespace ckptfs::meta {

class Barrier {
 public:
  // How a waiting commit ends: the checkpoint (COMMITTED, or PENDING when
  // the poll ran out), or an error. Called exactly once.
  using Done = std::function<void(absl::StatusOr<CheckpointInfo>)>;
  struct Waiter {
    uint32_t rank = 0;
    Done done;
  };

  // `info`: the PENDING checkpoint as stored; `arrived`: the stored ranks.
  Barrier(CheckpointInfo info, const std::vector<uint32_t>& arrived);

  // Counts `rank` (again: no change); whether it was new. REQUIRES: rank <
  // ranks.
  bool Arrive(uint32_t rank);
  bool complete() const { return count_ >= info_.ranks(); }
  // When the last missing rank was counted in (this process's clock);
  // nullopt while incomplete. For the release latency the service logs.
  std::optional<absl::Time> completed_at() const { return completed_at_; }
  uint32_t arrived() const { return count_; }
  // Up to `limit` ranks that have not arrived, ascending.
  std::vector<uint32_t> Missing(size_t limit) const;
  // The checkpoint, PENDING, with arrived filled in.
  CheckpointInfo Snapshot() const;
  const CheckpointInfo& info() const { return info_; }
  // When the barrier times out, on the service's clock: first_commit_ms +
  // timeout_s; nullopt before the first arrival.
  std::optional<int64_t> deadline_ms() const;

  void AddWaiter(absl::Time poll_deadline, Waiter waiter);
  size_t waiters() const { return waiters_.size(); }
  // The waiters whose poll deadline is at or before `now`.
  std::vector<Waiter> TakeExpired(absl::Time now);
  std::vector<Waiter> TakeAll();
  std::optional<absl::Time> next_poll_deadline() const;

  // The coordinator's bookkeeping: whether the stored arrivals have been
  // counted in (until then complete() may be short, never wrong the other
  // way); a commit or abort of this checkpoint is queued or running; and,
  // after one failed (the KV store), when to retry.
  bool loaded = true;
  bool ending = false;
  std::optional<absl::Time> retry_at;
  int failed_commits = 0;
  // Shared store (several metadata servers, CheckpointCoordinator::Options::
  // shared_poll): a new rank (not a renewed long poll) arrived here since
  // the store was last looked at;
  // and how many looks in a row found every rank stored while this server
  // had not counted them all.
  bool arrived_since_look = false;
  int stored_complete_looks = 0;

 private:
  CheckpointInfo info_;
  std::vector<bool> arrived_;  // by rank
  uint32_t count_ = 0;
  std::optional<absl::Time> completed_at_;
  std::multimap<absl::Time, Waiter> waiters_;  // by poll deadline
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_BARRIER_H_
