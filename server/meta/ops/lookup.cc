// Namespace::Lookup, GetAttr and ReadLink: the read-only inode operations.
// They read through a MetaTxn that is never committed.
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {

absl::StatusOr<Attr> Namespace::Lookup(uint64_t parent, absl::string_view name) {
  if (absl::Status valid = ValidateName(name); !valid.ok()) return valid;
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> dir = GetParentDir(txn, parent);
  if (!dir.ok()) return dir.status();
  absl::StatusOr<std::optional<DentryRecord>> dentry = txn.GetDentry(parent, name);
  if (!dentry.ok()) return dentry.status();
  if (!dentry->has_value()) {
    return ErrnoStatus(ENOENT, absl::StrCat("no entry \"", name, "\" in directory ", parent));
  }
  absl::StatusOr<InodeRecord> inode = txn.GetInode((*dentry)->ino());
  if (!inode.ok()) return inode.status();
  return inode->attr();
}

absl::StatusOr<Attr> Namespace::GetAttr(uint64_t ino) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
  if (!inode.ok()) return inode.status();
  return inode->attr();
}

absl::StatusOr<AttrReply> Namespace::GetAttr(const InodeRequest& request) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> inode = txn.GetInode(request.ino());
  if (!inode.ok()) return inode.status();
  AttrReply reply;
  *reply.mutable_attr() = std::move(*inode->mutable_attr());
  if (request.with_written() && reply.attr().type() == REGULAR) {
    *reply.mutable_written() = std::move(*inode->mutable_written());
  }
  return reply;
}

absl::StatusOr<std::string> Namespace::ReadLink(uint64_t ino) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
  if (!inode.ok()) return inode.status();
  if (inode->attr().type() != SYMLINK) {
    return ErrnoStatus(EINVAL, absl::StrCat("inode ", ino, " is not a symlink"));
  }
  return inode->symlink_target();
}

}  // namespace ckptfs::meta
