// Namespace::SetAttr: chmod, chown, truncate and utimens in one transaction,
// and the clearing of set-id bits that a write by an unprivileged process
// makes (KILL_SETID).
// Nothing changes inside an ended checkpoint (EROFS); truncation to 0 clears
// a file's damaged mark. A truncation drops the written chunks wholly past
// the new size (common/written_chunks.h); one that extends adds none, so
// the extension reads as a hole.
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/file_type.h"
#include "common/written_chunks.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {

absl::StatusOr<Attr> Namespace::SetAttr(const SetAttrRequest& request) {
  const uint32_t valid = request.valid();
  return RunTxn<Attr>(kv_, "setattr", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    absl::StatusOr<InodeRecord> inode = txn.GetInode(request.ino());
    if (!inode.ok()) return inode.status();
    if (absl::Status writable = RequireMutable(txn, *inode, "setattr"); !writable.ok()) {
      return writable;
    }
    Attr* attr = inode->mutable_attr();
    const int64_t now = clock_->NowNs();
    if (valid & SET_SIZE) {
      if (attr->type() == DIRECTORY) {
        return ErrnoStatus(EISDIR,
                           absl::StrCat("truncate: inode ", request.ino(), " is a directory"));
      }
      if (attr->type() != REGULAR) {
        return ErrnoStatus(
            EINVAL, absl::StrCat("truncate: inode ", request.ino(), " is not a regular file"));
      }
      attr->set_size(request.size());
      attr->set_mtime_ns(now);
      TruncateWritten(*inode->mutable_written(), request.size(), attr->layout().chunk_size());
      if (request.size() == 0) {
        inode->set_damaged(false);
        inode->clear_unsynced();
      }
    }
    if (valid & SET_MODE) {
      attr->set_mode((attr->mode() & ~kPermissionBits) | (request.mode() & kPermissionBits));
    }
    if (valid & KILL_SETID) attr->set_mode(ModeAfterUnprivilegedWrite(attr->mode()));
    if (valid & SET_UID) attr->set_uid(request.uid());
    if (valid & SET_GID) attr->set_gid(request.gid());
    if (valid & SET_ATIME) attr->set_atime_ns(request.atime_ns());
    if (valid & SET_ATIME_NOW) attr->set_atime_ns(now);
    if (valid & SET_MTIME) attr->set_mtime_ns(request.mtime_ns());
    if (valid & SET_MTIME_NOW) attr->set_mtime_ns(now);
    attr->set_ctime_ns(NextCtime(*attr, now));
    txn.PutInode(*inode);
    return *attr;
  });
}

}  // namespace ckptfs::meta
