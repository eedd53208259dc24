// Extended-attribute operations: setxattr, getxattr, listxattr,
// removexattr. Values live in the metadata service (which also reads
// user.ckptfs.* attributes such as the per-directory chunk size). The
// checkpoint names (client/checkpoint_xattr_parsing.h: ranks, commit, remove,
// state, info, checkpoints, latest) are served by the Client, exactly as for
// a program using libckptfs.
//
// A commit (setxattr user.ckptfs.commit, or getxattr user.ckptfs.commit.R)
// blocks its worker thread until the barrier ends; the mount runs enough
// workers for many ranks to wait at once (MountOptions::max_threads). The
// kernel holds the directory's inode lock through a setxattr, so only the
// getxattr form lets several local ranks wait on one checkpoint together
// (client/checkpoint_xattr_parsing.h). A signal to the waiting process makes the
// kernel send FUSE_INTERRUPT: the commit then returns EINTR at once (the
// rank's arrival stays recorded; committing again waits for the same
// outcome).
//
// Who may commit, declare and remove follows the permission bits as for the
// equivalent file operations (fuse/checkpoint_access.h).
//
// getxattr and listxattr follow the two-step protocol of the syscalls: a
// size-0 request asks only for the length; a buffer too small gets ERANGE.
#include <cerrno>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/cancellation.h"
#include "client/checkpoint_xattr_parsing.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/log_limiter.h"
#include "fuse/checkpoint_access.h"
#include "fuse/filesystem.h"
#include "fuse/ops.h"
#include "fuse/reply.h"
#include "fuse/xattr_names.h"

namespace ckptfs::fuse {
namespace {

// Replies to a getxattr/listxattr of a `size`-byte buffer with `value`.
void ReplyXattrValue(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
  } else if (value.size() > size) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, value.data(), value.size());
  }
}

// FUSE_INTERRUPT of a request waiting in a commit; runs on the thread that
// read the interrupt, under the request's lock.
void CancelOnInterrupt(fuse_req_t /*req*/, void* data) {
  static_cast<client::Cancellation*>(data)->Cancel();
}

// Runs `call` (which may block in a commit) with a Cancellation that an
// interrupt of `req` cancels.
template <typename Call>
auto Interruptible(fuse_req_t req, Call call) {
  client::Cancellation cancel;
  fuse_req_interrupt_func(req, CancelOnInterrupt, &cancel);
  auto result = call(&cancel);
  // Unregistering takes the request's lock, so an interrupt callback
  // running right now finishes before `cancel` goes away.
  fuse_req_interrupt_func(req, nullptr, nullptr);
  return result;
}

// StaleIfInodeGone, except for the checkpoint names: their ENOENT is the
// checkpoint's (a commit whose checkpoint was removed while it waited, a
// remove of an absent one), and the kernel's retry on ESTALE would run a
// commit again on whatever directory now has the name.
absl::Status StaleUnlessCheckpoint(Filesystem& fs, fuse_ino_t ino, const char* name,
                                   const absl::Status& status) {
  if (client::ClassifyCheckpointXattr(name) != client::CheckpointXattr::kNone) return status;
  return StaleIfInodeGone(fs, ino, status);
}

// `status`, logged when it refuses a checkpoint operation for the
// permission bits (at most about a line a second: a user cannot flood the
// mount's log).
absl::Status LogRefusal(const char* op, const char* name, absl::Status status) {
  const int err = ErrnoFromStatus(status);
  if (err != EACCES && err != EPERM) return status;
  static LogLimiter limiter(absl::Seconds(1));
  if (std::string held_back; limiter.Allow(&held_back)) {
    CKPTFS_LOG(kInfo) << op << " " << name << " refused: " << status.message() << held_back;
  }
  return status;
}

bool IsCommit(const char* name) {
  const client::CheckpointXattr which = client::ClassifyCheckpointXattr(name);
  return which == client::CheckpointXattr::kCommit || which == client::CheckpointXattr::kCommitRank;
}

absl::Status DoSetXattr(fuse_req_t req, Filesystem& fs, fuse_ino_t ino, const char* name,
                        const char* value, size_t size, int flags) {
  if (!IsStoredXattrName(name)) {
    return ErrnoStatus(EOPNOTSUPP, absl::StrCat("xattr namespace of ", name, " not supported"));
  }
  const absl::string_view data(value, size);
  if (client::ClassifyCheckpointXattr(name) == client::CheckpointXattr::kRemove) {
    return LogRefusal("setxattr", name,
                      RemoveCheckedCheckpoint(fs.client(), CallerOf(req), ino, data));
  }
  if (!IsCommit(name)) return fs.client().SetXattr(ino, name, data, flags);
  return Interruptible(req, [&](client::Cancellation* cancel) {
    return fs.client().SetXattr(ino, name, data, flags, cancel);
  });
}

void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags) {
  Filesystem& fs = FsOf(req);
  absl::Status status = DoSetXattr(req, fs, ino, name, value, size, flags);
  if (!status.ok()) {
    return ReplyError(req, StaleUnlessCheckpoint(fs, ino, name, status), "setxattr", ino);
  }
  fuse_reply_err(req, 0);
}

absl::StatusOr<std::string> DoGetXattr(fuse_req_t req, Filesystem& fs, fuse_ino_t ino,
                                       const char* name) {
  if (!IsStoredXattrName(name)) return ErrnoStatus(ENODATA, name);
  if (!IsCommit(name)) return fs.client().GetXattr(ino, name);
  if (client::ClassifyCheckpointXattr(name) == client::CheckpointXattr::kCommitRank) {
    absl::Status access =
        LogRefusal("getxattr", name, CheckCommitAsRead(fs.client(), CallerOf(req), ino, name));
    if (!access.ok()) return access;
  }
  return Interruptible(
      req, [&](client::Cancellation* cancel) { return fs.client().GetXattr(ino, name, cancel); });
}

void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  Filesystem& fs = FsOf(req);
  absl::StatusOr<std::string> value = DoGetXattr(req, fs, ino, name);
  if (!value.ok()) {
    return ReplyError(req, StaleUnlessCheckpoint(fs, ino, name, value.status()), "getxattr", ino);
  }
  ReplyXattrValue(req, *value, size);
}

absl::StatusOr<std::string> DoListXattr(Filesystem& fs, fuse_ino_t ino) {
  absl::StatusOr<std::vector<std::string>> names = fs.client().ListXattr(ino);
  if (!names.ok()) return names.status();
  return PackXattrNames(*names);
}

void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Filesystem& fs = FsOf(req);
  absl::StatusOr<std::string> packed = DoListXattr(fs, ino);
  if (!packed.ok()) {
    return ReplyError(req, StaleIfInodeGone(fs, ino, packed.status()), "listxattr", ino);
  }
  ReplyXattrValue(req, *packed, size);
}

absl::Status DoRemoveXattr(Filesystem& fs, fuse_ino_t ino, const char* name) {
  if (!IsStoredXattrName(name)) return ErrnoStatus(ENODATA, name);
  return fs.client().RemoveXattr(ino, name);
}

void RemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  Filesystem& fs = FsOf(req);
  absl::Status status = DoRemoveXattr(fs, ino, name);
  if (!status.ok()) {
    return ReplyError(req, StaleUnlessCheckpoint(fs, ino, name, status), "removexattr", ino);
  }
  fuse_reply_err(req, 0);
}

}  // namespace

void AddXattrOps(fuse_lowlevel_ops* ops) {
  ops->setxattr = SetXattr;
  ops->getxattr = GetXattr;
  ops->listxattr = ListXattr;
  ops->removexattr = RemoveXattr;
}

}  // namespace ckptfs::fuse
