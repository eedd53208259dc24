// See commit_coalescer.h. Round is a loop under mu_ that releases it for
// each RPC and each wait; a group's state changes only under mu_, and every
// change a waiter acts on (a publish, the end of a poll) signals its
// condition variable.
#include "client/commit_coalescer.h"

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace ckptfs::client {
namespace {

absl::Status Interrupted(uint64_t ino, uint32_t rank) {
  return ErrnoStatus(EINTR, absl::StrCat("commit of rank ", rank, " of checkpoint ", ino,
                                         " interrupted while waiting"));
}

meta::CommitCheckpointRequest CommitRequest(uint64_t ino, uint32_t rank) {
  meta::CommitCheckpointRequest request;
  request.set_ino(ino);
  request.set_rank(rank);
  return request;
}

}  // namespace

absl::StatusOr<meta::CheckpointInfo> CommitCoalescer::Round(uint64_t ino, uint32_t rank,
                                                            uint32_t wait_ms, bool* arrived_already,
                                                            Cancellation* cancel) {
  mu_.Lock();
  Group* group = Join(ino);
  // Only replies published after this call began answer it: an older one
  // is what the caller's previous round already saw.
  const uint64_t seen = group->published;
  absl::StatusOr<meta::CheckpointInfo> result;
  while (true) {
    if (cancel != nullptr && cancel->cancelled()) {
      result = Interrupted(ino, rank);
      break;
    }
    if (group->published != seen) {
      result = *group->reply;
      break;
    }
    if (!group->polling) {
      result = Poll(group, ino, rank, wait_ms, arrived_already, cancel);
      break;
    }
    if (!*arrived_already) {
      mu_.Unlock();
      meta::CommitCheckpointRequest request = CommitRequest(ino, rank);
      request.set_no_wait(true);
      absl::StatusOr<meta::CheckpointInfo> arrival = meta_->CommitCheckpoint(request, cancel);
      mu_.Lock();
      if (!arrival.ok() || arrival->state() != meta::PENDING) {
        result = std::move(arrival);
        break;
      }
      *arrived_already = true;
      continue;
    }
    mu_.Unlock();
    Wait(group, seen, cancel);
    mu_.Lock();
  }
  Leave(ino, group);
  mu_.Unlock();
  return result;
}

size_t CommitCoalescer::ActiveCheckpoints() const {
  absl::MutexLock lock(&mu_);
  return groups_.size();
}

CommitCoalescer::Group* CommitCoalescer::Join(uint64_t ino) {
  std::unique_ptr<Group>& group = groups_[ino];
  if (group == nullptr) group = std::make_unique<Group>();
  ++group->users;
  return group.get();
}

void CommitCoalescer::Leave(uint64_t ino, Group* group) {
  if (--group->users == 0) groups_.erase(ino);
}

absl::StatusOr<meta::CheckpointInfo> CommitCoalescer::Poll(Group* group, uint64_t ino,
                                                           uint32_t rank, uint32_t wait_ms,
                                                           bool* arrived_already,
                                                           Cancellation* cancel) {
  group->polling = true;
  mu_.Unlock();
  meta::CommitCheckpointRequest request = CommitRequest(ino, rank);
  request.set_wait_ms(wait_ms);
  absl::StatusOr<meta::CheckpointInfo> reply = meta_->CommitCheckpoint(request, cancel);
  mu_.Lock();
  group->polling = false;
  if (reply.ok()) {
    // Any answer of the service is every rank's answer; an error (this
    // rank's, or this call's) is not.
    ++group->published;
    group->reply = *reply;
    *arrived_already = true;
  }
  // Waiters return the reply, or one of them polls next.
  group->changed.SignalAll();
  return reply;
}

void CommitCoalescer::Wait(Group* group, uint64_t seen, Cancellation* cancel) {
  // Made and destroyed without mu_: its callback runs under the
  // Cancellation's lock and takes mu_.
  Cancellation::OnCancel wake(cancel, [this, group] {
    absl::MutexLock lock(&mu_);
    group->changed.SignalAll();
  });
  absl::MutexLock lock(&mu_);
  while (group->published == seen && group->polling &&
         !(cancel != nullptr && cancel->cancelled())) {
    group->changed.Wait(&mu_);
  }
}

}  // namespace ckptfs::client
