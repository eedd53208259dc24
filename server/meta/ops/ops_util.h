// Helpers shared by the namespace operations in server/meta/ops/: building
// inode and dentry records, type checks, and the orphaning of a file whose
// last name goes. Internal to the metadata service.
//
// Thread-safety: pure functions, or functions on a caller-owned MetaTxn.
#ifndef CKPTFS_SERVER_META_OPS_OPS_UTIL_H_
#define CKPTFS_SERVER_META_OPS_OPS_UTIL_H_

#include <sys/stat.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/meta_store.pb.h"
#include "server/meta/meta_txn.h"

namespace ckptfs::meta {

inline constexpr uint32_t kPermissionBits = 07777;

// OK if `value` (a symlink target, an xattr name) can be kept in a string
// field of a stored record: valid UTF-8, which protobuf's parser demands of
// proto3 strings, so a record holding anything else could be written but
// never read back (the inode would be lost to EIO). EINVAL naming `what`
// otherwise.
absl::Status RequireStorableString(absl::string_view value, absl::string_view what);

// ValidateName for a name an operation is about to create (create, mkdir,
// symlink, rename's target): also RequireStorableString, since names travel
// in string fields (readdir replies, a checkpoint's info) — one that is not
// UTF-8 would make its directory unlistable over gRPC.
absl::Status ValidateNewName(absl::string_view name);

// A fresh inode record. `perm` is masked to permission bits; the type bits
// come from `type`. nlink: 2 for a directory, 1 otherwise.
InodeRecord NewInode(uint64_t ino, FileType type, uint32_t perm, uint32_t uid, uint32_t gid,
                     int64_t now_ns);

inline bool IsDir(const InodeRecord& inode) { return inode.attr().type() == DIRECTORY; }

// The directory `ino`, read through `txn`: ENOENT if missing, ENOTDIR if it
// is not a directory.
absl::StatusOr<InodeRecord> GetDir(MetaTxn& txn, uint64_t ino);

// EEXIST: `name` already exists in directory `parent`.
absl::Status NameExistsError(absl::string_view name, uint64_t parent);

// EEXIST if `name` is taken in `parent` (read through `txn`, so compared: a
// racing operation that takes the name conflicts).
absl::Status RequireFreeName(MetaTxn& txn, uint64_t parent, absl::string_view name);

// GetDir for the parent directory an operation names an entry in (lookup,
// create, mkdir, symlink, unlink, rmdir, rename): a parent that no longer
// exists is ESTALE, not ENOENT. A mount that cached the directory (its
// dir_timeout) then knows its handle is stale rather than that the name is
// absent: the kernel walks the path again with revalidation and finds a
// directory recreated under the same name, as NFS clients do.
absl::StatusOr<InodeRecord> GetParentDir(MetaTxn& txn, uint64_t ino);

// The ctime that a commit of writes, a truncate or a setattr sets at
// `now_ns`: later than the one the file had, even within one clock tick or
// after the service's clock stepped back, so that those changes — all that
// can alter a file's content — always show in ctime to clients' caches
// (client::FileVersion). Other ctime updates use the clock as it is.
inline int64_t NextCtime(const Attr& attr, int64_t now_ns) {
  return now_ns > attr.ctime_ns() ? now_ns : attr.ctime_ns() + 1;
}

// Sets mtime and ctime: an entry was added or removed.
void TouchDir(InodeRecord& dir, int64_t now_ns);

DentryRecord MakeDentry(const InodeRecord& inode);

// Registers `writer` (nonzero) as a writer of `inode`; false if it already
// was, or `writer` is 0 (no change).
bool AddWriter(InodeRecord& inode, uint64_t writer);
// Removes writer registration `writer`; false if there was none.
bool RemoveWriter(InodeRecord& inode, uint64_t writer);

// OK unless `inode` is a checkpoint directory, which a rename does not
// replace: EROFS once it ended, EBUSY while it is pending. (rmdir has its
// own rule, checkpoint/name_removal.h; defined in ops/remove.cc.)
absl::Status RequireNotCheckpointDir(MetaTxn& txn, const InodeRecord& inode, absl::string_view op);

// Stages the removal of one name of `inode` (the dentry itself is the
// caller's): an inode that keeps other hard links loses one from nlink and
// gets a new ctime; at its last name, a regular file becomes an orphan
// reclaimed after `grace`, and any other inode is deleted and the inode
// count decremented.
absl::Status ReleaseInode(MetaTxn& txn, InodeRecord inode, int64_t now_ns, absl::Duration grace);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_OPS_OPS_UTIL_H_
