// CommitCoalescer: one long poll per checkpoint for all the ranks that
// commit it through one Client (one mount), instead of one per rank.
//
// Eight ranks on a node commit through the same mount; left alone, each
// rank holds its own CommitCheckpoint long poll and the metadata service
// answers 4,096 polls for 4,096 ranks at release. Here the first rank of a
// checkpoint to call Round becomes its poller and sends the long poll; the
// others only record their arrival (a no_wait CommitCheckpoint, answered at
// once) and wait for the poller's reply, which is published to all of
// them. At release the service answers one poll per client.
//
// What each rank gets back is what a long poll of its own would have given
// it, as far as its commit loop (Client::CommitCheckpoint) can tell: a
// CheckpointInfo (COMMITTED, ABORTED, or PENDING — call Round again), or an
// error of its own. A rank's error never reaches another rank: the poller's
// error (its bad rank, its connection, its cancellation) is returned to it
// alone, and a waiting rank then takes over the poll; a no_wait arrival's
// error is returned to its rank.
//
// Thread-safety: thread-safe; Round blocks (call it from the rank's own
// thread). Lock order: a Cancellation's lock before mu_ (the OnCancel
// callback takes mu_), so an OnCancel is never made or destroyed under mu_;
// mu_ is never held across an RPC. The MetaClient is borrowed and must
// outlive the coalescer.
#ifndef CKPTFS_CLIENT_COMMIT_COALESCER_H_
#define CKPTFS_CLIENT_COMMIT_COALESCER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/cancellation.h"
#include "client/meta_client.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

class CommitCoalescer {
 public:
  explicit CommitCoalescer(MetaClient* meta) : meta_(meta) {}
  CommitCoalescer(const CommitCoalescer&) = delete;
  CommitCoalescer& operator=(const CommitCoalescer&) = delete;
  // REQUIRES: no Round in progress.
  ~CommitCoalescer() = default;

  // One round of rank `rank`'s commit of checkpoint `ino`, where a rank of
  // its own would send one CommitCheckpoint long poll of `wait_ms`.
  // `arrived_already` is the rank's state across its rounds: false before
  // the first; set once the service has acknowledged the rank's arrival
  // (its own long poll answered, or its no_wait arrival answered PENDING),
  // after which the rank only waits.
  //
  // Returns the first of: this rank's own poll's reply (any state) or
  // error; its no_wait arrival's error or final state; a poll reply that
  // another rank published after this call began; EINTR once `cancel`
  // fires (the poller's RPC is cancelled; a waiting rank stops waiting).
  // May be null.
  absl::StatusOr<meta::CheckpointInfo> Round(uint64_t ino, uint32_t rank, uint32_t wait_ms,
                                             bool* arrived_already, Cancellation* cancel);

  // Checkpoints with a Round in progress (tests: groups are dropped when
  // their last rank leaves).
  size_t ActiveCheckpoints() const;

 private:
  // The ranks of one checkpoint in Round now.
  struct Group {
    int users = 0;         // threads in Round for this checkpoint
    bool polling = false;  // a long poll is in flight
    // Poll replies published so far, and the last one.
    uint64_t published = 0;
    std::optional<meta::CheckpointInfo> reply;
    // Signalled on a publish, at the end of a poll, and on a cancel.
    absl::CondVar changed;
  };

  Group* Join(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Leave(uint64_t ino, Group* group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends rank's long poll as the group's poller (mu_ released meanwhile)
  // and publishes an OK reply, which also acknowledges the rank's arrival.
  absl::StatusOr<meta::CheckpointInfo> Poll(Group* group, uint64_t ino, uint32_t rank,
                                            uint32_t wait_ms, bool* arrived_already,
                                            Cancellation* cancel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until `group` publishes past `seen`, stops polling, or `cancel`
  // fires.
  void Wait(Group* group, uint64_t seen, Cancellation* cancel) ABSL_LOCKS_EXCLUDED(mu_);

  MetaClient* const meta_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Group>> groups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_COMMIT_COALESCER_H_
