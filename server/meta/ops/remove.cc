// Namespace::Unlink and Rmdir: the operations that remove a name. Removing
// names is the one change an ended checkpoint takes; the first removal in a
// committed checkpoint ends its validity (checkpoint/name_removal.h). A
// pending checkpoint's directory itself is not rmdir'ed (EBUSY).
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/checkpoint/name_removal.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

// The inode named `name` in `parent` (read through `txn`), with the parent.
struct Named {
  InodeRecord parent;
  InodeRecord inode;
};

absl::StatusOr<Named> ReadNamed(MetaTxn& txn, uint64_t parent, absl::string_view name) {
  absl::StatusOr<InodeRecord> dir = GetParentDir(txn, parent);
  if (!dir.ok()) return dir.status();
  absl::StatusOr<std::optional<DentryRecord>> dentry = txn.GetDentry(parent, name);
  if (!dentry.ok()) return dentry.status();
  if (!dentry->has_value()) {
    return ErrnoStatus(ENOENT, absl::StrCat("no entry \"", name, "\" in directory ", parent));
  }
  absl::StatusOr<InodeRecord> inode = txn.GetInode((*dentry)->ino());
  if (!inode.ok()) return inode.status();
  return Named{*std::move(dir), *std::move(inode)};
}

}  // namespace

absl::Status RequireNotCheckpointDir(MetaTxn& txn, const InodeRecord& inode, absl::string_view op) {
  if (!IsCheckpointDir(inode)) return absl::OkStatus();
  if (absl::Status writable = RequireMutable(txn, inode, op); !writable.ok()) return writable;
  return ErrnoStatus(EBUSY, absl::StrCat(op, ": directory ", inode.attr().ino(),
                                         " is a pending checkpoint; remove it with "
                                         "RemoveCheckpoint (ckptfs ckpt rm)"));
}

absl::Status Namespace::Unlink(uint64_t parent, absl::string_view name) {
  if (absl::Status valid = ValidateName(name); !valid.ok()) return valid;
  std::optional<uint64_t> latest_ino;  // allocated once, kept across retries
  return RunTxn(kv_, "unlink", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<Named> named = ReadNamed(txn, parent, name);
    if (!named.ok()) return named.status();
    if (IsDir(named->inode)) {
      return ErrnoStatus(EISDIR, absl::StrCat("unlink: \"", name, "\" is a directory"));
    }
    const int64_t now = clock_->NowNs();
    if (absl::Status removable = BeforeNameRemoval(txn, inodes_, latest_ino, named->parent, now);
        !removable.ok()) {
      return removable;
    }
    txn.Delete(DentryKey(parent, name));
    TouchDir(named->parent, now);
    txn.PutInode(named->parent);
    return ReleaseInode(txn, std::move(named->inode), now, options_.orphan_grace);
  });
}

absl::Status Namespace::Rmdir(uint64_t parent, absl::string_view name) {
  if (absl::Status valid = ValidateName(name); !valid.ok()) return valid;
  std::optional<uint64_t> latest_ino;  // allocated once, kept across retries
  return RunTxn(kv_, "rmdir", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<Named> named = ReadNamed(txn, parent, name);
    if (!named.ok()) return named.status();
    if (!IsDir(named->inode)) {
      return ErrnoStatus(ENOTDIR, absl::StrCat("rmdir: \"", name, "\" is not a directory"));
    }
    const int64_t now = clock_->NowNs();
    if (IsCheckpointDir(named->inode)) {
      if (absl::Status removable = BeforeCheckpointDirRemoval(
              txn, inodes_, latest_ino, named->inode, named->parent, name, now);
          !removable.ok()) {
        return removable;
      }
    }
    absl::StatusOr<bool> has_entries = txn.DirHasEntries(named->inode.attr().ino());
    if (!has_entries.ok()) return has_entries.status();
    if (*has_entries) {
      return ErrnoStatus(ENOTEMPTY, absl::StrCat("rmdir: directory \"", name, "\" is not empty"));
    }
    if (absl::Status removable = BeforeNameRemoval(txn, inodes_, latest_ino, named->parent, now);
        !removable.ok()) {
      return removable;
    }
    txn.Delete(DentryKey(parent, name));
    named->parent.mutable_attr()->set_nlink(named->parent.attr().nlink() - 1);
    TouchDir(named->parent, now);
    txn.PutInode(named->parent);
    return ReleaseInode(txn, std::move(named->inode), now, options_.orphan_grace);
  });
}

}  // namespace ckptfs::meta
