// Helpers shared by the FUSE operations: finding the Filesystem of a
// request, turning a Status into the errno of a reply (the one place where
// that happens), telling a removed inode from a missing name, and building
// entry replies. Thread-safe.
#ifndef CKPTFS_FUSE_REPLY_H_
#define CKPTFS_FUSE_REPLY_H_

#include <fuse_lowlevel.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuse/filesystem.h"
#include "proto/meta.pb.h"

namespace ckptfs::fuse {

// The Filesystem serving `req` (the session's userdata).
inline Filesystem& FsOf(fuse_req_t req) {
  return *static_cast<Filesystem*>(fuse_req_userdata(req));
}

// The errno a FUSE reply carries for `status` (not OK). ENOSYS is never
// returned for an operation ckptfs implements: the kernel would take it as
// "operation unsupported" and stop calling it for the life of the mount
// (a flush or fsync would then silently succeed), so it becomes EIO.
int ReplyErrnoFor(const absl::Status& status);

// Replies with the errno of `status` (REQUIRES: !status.ok()). Errors a
// caller provokes (ENOENT, EEXIST, ENOTEMPTY, ...) are logged at debug
// level; EIO and other unexpected ones at warning level, with `op`, the
// inode it was about and the status' own context.
void ReplyError(fuse_req_t req, const absl::Status& status, absl::string_view op, uint64_t ino);

// The service's attributes of inode `ino`, or ESTALE when the inode no
// longer exists: the kernel still knows an inode another mount removed
// while this one cached it (--attr_timeout_s, --entry_timeout_s,
// --dir_timeout_s). That is a stale handle, not a missing name: the kernel
// walks the path again revalidating each component and finds whatever now
// has the name.
absl::StatusOr<meta::Attr> CurrentAttr(Filesystem& fs, uint64_t ino);

// `status` answered an operation addressed to inode `ino` (not to a name
// in a directory): ESTALE when it is ENOENT and CurrentAttr says the inode
// itself is gone; otherwise `status` unchanged. The check costs a GETATTR,
// on the ENOENT path only.
absl::Status StaleIfInodeGone(Filesystem& fs, uint64_t ino, absl::Status status);

// The entry reply for `attr`, with this mount's timeouts.
fuse_entry_param MakeEntry(const Filesystem& fs, const meta::Attr& attr);

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_REPLY_H_
