// See reply.h.
#include "fuse/reply.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "fuse/attr.h"
#include "fuse/op_metrics.h"

namespace ckptfs::fuse {
namespace {

// Errnos that answer a caller's own mistake or a race it lost; they are part
// of normal operation and not worth a warning.
bool IsExpected(int err) {
  switch (err) {
    case ENOENT:
    case EEXIST:
    case ENOTEMPTY:
    case ENOTDIR:
    case EISDIR:
    case EINVAL:
    case ENAMETOOLONG:
    case EACCES:
    case EPERM:
    case ENODATA:
    case ERANGE:
    case EBADF:
    case EXDEV:
    case EOPNOTSUPP:
    case ENOSPC:
    case EFBIG:
    case EROFS:   // a write into a committed checkpoint
    case EINTR:   // a signal interrupted a waiting commit
    case ESTALE:  // an inode removed elsewhere (StaleIfInodeGone); `ckpt gc`: the
                  // checkpoint changed since it was listed
      return true;
    default:
      return false;
  }
}

}  // namespace

int ReplyErrnoFor(const absl::Status& status) {
  int err = ErrnoFromStatus(status);
  if (err <= 0 || err == ENOSYS) err = EIO;
  return err;
}

void ReplyError(fuse_req_t req, const absl::Status& status, absl::string_view op, uint64_t ino) {
  const int err = ReplyErrnoFor(status);
  CountErrorReply(err);
  if (IsExpected(err)) {
    CKPTFS_LOG(kDebug) << op << " ino " << ino << ": " << std::strerror(err) << " (" << status
                       << ")";
  } else {
    CKPTFS_LOG(kWarning) << op << " ino " << ino << " failed with " << std::strerror(err) << ": "
                         << status;
  }
  fuse_reply_err(req, err);
}

absl::StatusOr<meta::Attr> CurrentAttr(Filesystem& fs, uint64_t ino) {
  absl::StatusOr<meta::Attr> attr = fs.client().GetAttr(ino);
  if (!attr.ok() && ErrnoFromStatus(attr.status()) == ENOENT) {
    return ErrnoStatus(ESTALE, absl::StrCat("inode ", ino, " no longer exists"));
  }
  return attr;
}

absl::Status StaleIfInodeGone(Filesystem& fs, uint64_t ino, absl::Status status) {
  if (status.ok() || ErrnoFromStatus(status) != ENOENT) return status;
  absl::StatusOr<meta::Attr> attr = CurrentAttr(fs, ino);
  if (!attr.ok() && ErrnoFromStatus(attr.status()) == ESTALE) return attr.status();
  return status;
}

fuse_entry_param MakeEntry(const Filesystem& fs, const meta::Attr& attr) {
  fuse_entry_param entry;
  std::memset(&entry, 0, sizeof(entry));
  entry.ino = attr.ino();
  // Inode numbers are never reused, so one generation serves them all.
  entry.generation = 1;
  entry.attr = AttrToStat(attr);
  entry.attr_timeout = fs.AttrTimeoutFor(attr);
  entry.entry_timeout = fs.EntryTimeoutFor(attr);
  return entry;
}

}  // namespace ckptfs::fuse
