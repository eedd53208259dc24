// Namespace::Open and CommitWrite: the metadata side of a file's data —
// O_TRUNC at open, and the close-to-open publication of a writer's size.
#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

absl::Status RequireRegular(const InodeRecord& inode, absl::string_view op) {
  switch (inode.attr().type()) {
    case REGULAR: return absl::OkStatus();
    case DIRECTORY:
      return ErrnoStatus(EISDIR, absl::StrCat(op, ": inode ", inode.attr().ino(),
                                              " is a directory"));
    default:
      return ErrnoStatus(EINVAL, absl::StrCat(op, ": inode ", inode.attr().ino(),
                                              " is not a regular file"));
  }
}

}  // namespace

absl::StatusOr<Attr> Namespace::Open(uint64_t ino, bool truncate) {
  if (!truncate) return GetAttr(ino);
  return RunTxn<Attr>(kv_, "open", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
    if (!inode.ok()) return inode.status();
    if (absl::Status regular = RequireRegular(*inode, "open O_TRUNC"); !regular.ok()) {
      return regular;
    }
    const int64_t now = clock_->NowNs();
    inode->mutable_attr()->set_size(0);
    inode->mutable_attr()->set_mtime_ns(now);
    inode->mutable_attr()->set_ctime_ns(now);
    txn.PutInode(*inode);
    return inode->attr();
  });
}

absl::StatusOr<Attr> Namespace::CommitWrite(uint64_t ino, uint64_t size, int64_t mtime_ns,
                                             bool durable) {
  return RunTxn<Attr>(kv_, "commit write", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    if (durable) txn.RequireDurable();
    absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
    if (!inode.ok()) return inode.status();
    if (absl::Status regular = RequireRegular(*inode, "commit write"); !regular.ok()) {
      return regular;
    }
    const int64_t now = clock_->NowNs();
    Attr* attr = inode->mutable_attr();
    attr->set_size(std::max(attr->size(), size));
    attr->set_mtime_ns(mtime_ns != 0 ? mtime_ns : now);
    attr->set_ctime_ns(now);
    txn.PutInode(*inode);
    return *attr;
  });
}

}  // namespace ckptfs::meta
