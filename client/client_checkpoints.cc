// Client's checkpoint calls (client.h, "Checkpoint transactions") and the
// checkpoint extended attributes that SetXattr / GetXattr route here.
//
// CommitCheckpoint is a loop of long polls: each round waits up to
// options.commit_poll and answers PENDING if the barrier has not ended;
// calling again is safe (a commit is idempotent). The rounds go through the
// client's CommitCoalescer, so that the ranks committing one checkpoint
// through this client share one long poll (the others send only their
// arrival). The service stores each arrival before it answers, so a poll
// that fails because the service is restarting is simply sent again once it
// is back.
#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/checkpoint_xattr_parsing.h"
#include "client/client.h"
#include "client/client_impl.h"
#include "common/entry_name.h"
#include "common/errno_status.h"

namespace ckptfs::client {
namespace {

// The service's --commit_timeout_s default: the wait assumed for a
// checkpoint whose timeout this client never learned (its first poll failed).
constexpr uint32_t kDefaultCommitTimeoutS = 600;
constexpr absl::Duration kMinBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(2);

absl::Status Interrupted(uint64_t dir, uint32_t rank) {
  return ErrnoStatus(EINTR, absl::StrCat("commit of rank ", rank, " of checkpoint ", dir,
                                         " interrupted; committing again waits for the same "
                                         "outcome"));
}

// A service restarting or out of reach: worth waiting for.
bool Unreachable(const absl::Status& status) {
  return IsMetaTransportError(status) && (status.code() == absl::StatusCode::kUnavailable ||
                                          status.code() == absl::StatusCode::kDeadlineExceeded);
}

// The read side of a name the service does not know for this inode: a
// directory that is no checkpoint (EINVAL), or not a directory (ENOTDIR).
absl::Status NoData(const absl::Status& status, absl::string_view name) {
  const int err = ErrnoFromStatus(status);
  if (err == EINVAL || err == ENOTDIR) {
    return ErrnoStatus(ENODATA, absl::StrCat(name, ": ", status.message()));
  }
  return status;
}

}  // namespace

absl::StatusOr<meta::CheckpointInfo> Client::DeclareCheckpoint(uint64_t dir, uint32_t ranks,
                                                               uint32_t timeout_s) {
  if (ranks < 1 || ranks > kMaxCheckpointRanks) {
    return ErrnoStatus(
        EINVAL, absl::StrCat("a checkpoint has 1..", kMaxCheckpointRanks, " ranks, not ", ranks));
  }
  meta::DeclareCheckpointRequest request;
  request.set_ino(dir);
  request.set_ranks(ranks);
  request.set_timeout_s(timeout_s);
  return impl_->meta().DeclareCheckpoint(request);
}

absl::StatusOr<meta::CheckpointInfo> Client::CommitCheckpoint(uint64_t dir, uint32_t rank,
                                                              Cancellation* cancel) {
  const ClientOptions& options = impl_->services().options;
  const absl::Time start = absl::Now();
  std::optional<uint32_t> timeout_s;  // learned from the first answer
  absl::Duration backoff = kMinBackoff;
  const uint32_t wait_ms =
      static_cast<uint32_t>(std::max<int64_t>(1, absl::ToInt64Milliseconds(options.commit_poll)));
  bool arrived = false;  // the service acknowledged this rank's arrival
  auto give_up_at = [&] {
    return start + absl::Seconds(timeout_s.value_or(kDefaultCommitTimeoutS)) +
           options.commit_unreachable_slack;
  };
  while (true) {
    if (cancel != nullptr && cancel->cancelled()) return Interrupted(dir, rank);
    absl::StatusOr<meta::CheckpointInfo> reply =
        impl_->commits().Round(dir, rank, wait_ms, &arrived, cancel);
    if (cancel != nullptr && cancel->cancelled()) return Interrupted(dir, rank);
    if (reply.ok()) {
      backoff = kMinBackoff;
      if (reply->timeout_s() > 0) timeout_s = reply->timeout_s();
      switch (reply->state()) {
        case meta::COMMITTED:
          return reply;
        case meta::ABORTED:
          return ErrnoStatus(reply->abort_errno() > 0 ? reply->abort_errno() : EIO,
                             reply->abort_reason());
        case meta::REMOVING:  // (the service answers ENOENT itself)
          return ErrnoStatus(ENOENT, absl::StrCat("checkpoint ", dir,
                                                  " committed, but it is being removed since"));
        case meta::PENDING:
          // The service ends the barrier itself by its timeout; this only
          // guards against one that never answers anything but PENDING.
          // Once every rank arrived, the service is committing (syncing
          // the storage servers may take long): wait for it.
          if (reply->arrived() >= reply->ranks() || absl::Now() < give_up_at()) continue;
          return ErrnoStatus(ETIMEDOUT, absl::StrCat("checkpoint ", dir, " still pending after ",
                                                     absl::FormatDuration(absl::Now() - start)));
        default:
          return ErrnoStatus(
              EIO, absl::StrCat("CommitCheckpoint of inode ", dir, " answered without a state"));
      }
    }
    if (!Unreachable(reply.status())) return reply.status();
    const absl::Duration left = give_up_at() - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return ErrnoStatus(ETIMEDOUT, absl::StrCat("commit of rank ", rank, " of checkpoint ", dir,
                                                 ": the metadata service was unreachable until the "
                                                 "checkpoint's timeout passed (",
                                                 reply.status().message(), ")"));
    }
    const absl::Duration pause = std::min(backoff, left);
    if (cancel != nullptr) {
      if (cancel->WaitFor(pause)) return Interrupted(dir, rank);
    } else {
      absl::SleepFor(pause);
    }
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

absl::StatusOr<meta::CheckpointInfo> Client::GetCheckpoint(uint64_t dir) {
  meta::InodeRequest request;
  request.set_ino(dir);
  return impl_->meta().GetCheckpoint(request);
}

absl::StatusOr<meta::ListCheckpointsReply> Client::ListCheckpoints(uint64_t run_dir) {
  meta::InodeRequest request;
  request.set_ino(run_dir);
  return impl_->meta().ListCheckpoints(request);
}

absl::Status Client::RemoveCheckpoint(uint64_t run_dir, absl::string_view name,
                                      std::optional<ExpectedCheckpoint> expected) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  meta::RemoveCheckpointRequest request;
  request.set_parent(run_dir);
  request.set_name(std::string(name));
  if (expected.has_value()) {
    request.set_expected_ino(expected->ino);
    request.set_expected_state(expected->state);
  }
  return impl_->meta().RemoveCheckpoint(request).status();
}

absl::Status Client::SetCheckpointXattr(uint64_t ino, absl::string_view name,
                                        absl::string_view value, Cancellation* cancel) {
  switch (ClassifyCheckpointXattr(name)) {
    case CheckpointXattr::kRanks: {
      absl::StatusOr<uint32_t> ranks = ParseCheckpointRanks(value);
      if (!ranks.ok()) return ranks.status();
      return DeclareCheckpoint(ino, *ranks).status();
    }
    case CheckpointXattr::kCommit: {
      absl::StatusOr<uint32_t> rank = ParseCheckpointRank(value);
      if (!rank.ok()) return rank.status();
      return CommitCheckpoint(ino, *rank, cancel).status();
    }
    case CheckpointXattr::kRemove: {
      absl::StatusOr<CheckpointRemoval> removal = ParseCheckpointRemoval(value);
      if (!removal.ok()) return removal.status();
      std::optional<ExpectedCheckpoint> expected;
      if (removal->expected_ino != 0) {
        expected = ExpectedCheckpoint{removal->expected_ino, removal->expected_state};
      }
      return RemoveCheckpoint(ino, removal->name, expected);
    }
    default:
      return ErrnoStatus(EINVAL, absl::StrCat(name, " is read-only"));
  }
}

absl::StatusOr<std::string> Client::GetCheckpointXattr(uint64_t ino, absl::string_view name,
                                                       Cancellation* cancel) {
  const CheckpointXattr which = ClassifyCheckpointXattr(name);
  switch (which) {
    case CheckpointXattr::kCommitRank: {
      absl::StatusOr<uint32_t> rank = ParseCommitRankXattr(name);
      if (!rank.ok()) return rank.status();
      absl::StatusOr<meta::CheckpointInfo> info = CommitCheckpoint(ino, *rank, cancel);
      if (!info.ok()) return info.status();
      return CheckpointStateName(info->state());
    }
    case CheckpointXattr::kState:
    case CheckpointXattr::kRanks:
    case CheckpointXattr::kInfo: {
      absl::StatusOr<meta::CheckpointInfo> info = GetCheckpoint(ino);
      if (!info.ok()) return NoData(info.status(), name);
      if (info->state() == meta::CHECKPOINT_STATE_UNSPECIFIED) {
        return ErrnoStatus(ENODATA, absl::StrCat(name, ": inode ", ino, " is not a checkpoint"));
      }
      if (which == CheckpointXattr::kState) return CheckpointStateName(info->state());
      if (which == CheckpointXattr::kRanks) return absl::StrCat(info->ranks());
      return FormatCheckpointInfo(*info);
    }
    case CheckpointXattr::kCheckpoints:
    case CheckpointXattr::kLatest: {
      absl::StatusOr<meta::ListCheckpointsReply> list = ListCheckpoints(ino);
      if (!list.ok()) return NoData(list.status(), name);
      if (which == CheckpointXattr::kLatest) {
        if (list->latest().empty()) {
          return ErrnoStatus(ENODATA, absl::StrCat(name, ": no committed checkpoint"));
        }
        return list->latest();
      }
      if (list->checkpoints_size() == 0) {
        return ErrnoStatus(ENODATA, absl::StrCat(name, ": no checkpoints"));
      }
      return FormatCheckpointList(*list);
    }
    default:
      // user.ckptfs.commit and user.ckptfs.remove are actions, not values.
      return ErrnoStatus(ENODATA, absl::StrCat(name, " cannot be read"));
  }
}

}  // namespace ckptfs::client
