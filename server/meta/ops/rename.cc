// Namespace::Rename: one transaction that moves a name, replacing a target
// as POSIX rename(2) does, and keeps parents' nlink and times right.
//
// Checkpoints: nothing moves into, out of or within an ended checkpoint
// (EROFS), and an ended checkpoint directory does not move; a pending one
// may (its recorded name follows). A directory never crosses a checkpoint
// boundary (EXDEV: its whole subtree would change checkpoint; `mv` falls
// back to copying); an inode of one name does, taking the new parent's
// checkpoint; one with more names (hard links) does not (EXDEV: its other
// names would be left on the other side; ops/link.cc). A checkpoint
// directory is never replaced (see Rmdir).
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

// Deeper trees than this are refused rather than walked.
constexpr int kMaxDepth = 4096;

// EINVAL if `dir` is `ancestor` or lies below it. Every inode walked is read
// through `txn`, so a concurrent move of any of them aborts the commit.
absl::Status CheckNotUnder(MetaTxn& txn, uint64_t dir, uint64_t ancestor) {
  uint64_t current = dir;
  for (int depth = 0; depth < kMaxDepth; ++depth) {
    if (current == ancestor) {
      return ErrnoStatus(EINVAL, absl::StrCat("rename: cannot move directory ", ancestor,
                                              " into its own subtree"));
    }
    if (current == kRootIno) return absl::OkStatus();
    absl::StatusOr<InodeRecord> inode = txn.GetInode(current);
    if (!inode.ok()) return inode.status();
    current = inode->parent();
  }
  return ErrnoStatus(ELOOP, "rename: directory tree too deep to check");
}

}  // namespace

absl::Status Namespace::Rename(const RenameRequest& request) {
  if (absl::Status valid = ValidateName(request.name()); !valid.ok()) return valid;
  if (absl::Status valid = ValidateNewName(request.new_name()); !valid.ok()) return valid;
  const uint64_t old_parent_ino = request.parent();
  const uint64_t new_parent_ino = request.new_parent();
  const bool same_parent = old_parent_ino == new_parent_ino;

  return RunTxn(kv_, "rename", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<InodeRecord> old_parent = GetParentDir(txn, old_parent_ino);
    if (!old_parent.ok()) return old_parent.status();
    absl::StatusOr<std::optional<DentryRecord>> src_dentry =
        txn.GetDentry(old_parent_ino, request.name());
    if (!src_dentry.ok()) return src_dentry.status();
    if (!src_dentry->has_value()) {
      return ErrnoStatus(ENOENT, absl::StrCat("rename: no entry \"", request.name(),
                                              "\" in directory ", old_parent_ino));
    }
    absl::StatusOr<InodeRecord> new_parent_read;
    InodeRecord* new_parent = &*old_parent;  // one record when the parents are the same
    if (!same_parent) {
      new_parent_read = GetParentDir(txn, new_parent_ino);
      if (!new_parent_read.ok()) return new_parent_read.status();
      new_parent = &*new_parent_read;
    }
    if (absl::Status writable = RequireMutable(txn, *old_parent, "rename"); !writable.ok()) {
      return writable;
    }
    if (absl::Status writable = RequireMutable(txn, *new_parent, "rename"); !writable.ok()) {
      return writable;
    }
    absl::StatusOr<InodeRecord> src = txn.GetInode((*src_dentry)->ino());
    if (!src.ok()) return src.status();
    const bool src_is_dir = IsDir(*src);
    if (absl::Status writable = RequireMutable(txn, *src, "rename"); !writable.ok()) {
      return writable;
    }
    const uint64_t new_checkpoint = CheckpointOf(*new_parent);
    const bool crossing = CheckpointOf(*old_parent) != new_checkpoint;
    if (src_is_dir && crossing) {
      return ErrnoStatus(EXDEV, absl::StrCat("rename: directory \"", request.name(),
                                             "\" cannot move across a checkpoint boundary"));
    }
    const bool hard_linked = !src_is_dir && src->attr().nlink() > 1;
    if (hard_linked && crossing) {
      return ErrnoStatus(EXDEV,
                         absl::StrCat("rename: \"", request.name(), "\" has ", src->attr().nlink(),
                                      " hard links and cannot move "
                                      "across a checkpoint boundary without them"));
    }

    absl::StatusOr<std::optional<DentryRecord>> dst_dentry =
        txn.GetDentry(new_parent_ino, request.new_name());
    if (!dst_dentry.ok()) return dst_dentry.status();
    std::optional<InodeRecord> dst;
    if (dst_dentry->has_value()) {
      if (request.no_replace()) {
        return ErrnoStatus(EEXIST, absl::StrCat("rename: \"", request.new_name(),
                                                "\" exists in directory ", new_parent_ino));
      }
      // The same inode under both names (including a name onto itself): POSIX
      // says do nothing.
      if ((*dst_dentry)->ino() == src->attr().ino()) return absl::OkStatus();
      absl::StatusOr<InodeRecord> target = txn.GetInode((*dst_dentry)->ino());
      if (!target.ok()) return target.status();
      if (absl::Status replaceable = RequireNotCheckpointDir(txn, *target, "rename");
          !replaceable.ok()) {
        return replaceable;
      }
      if (IsDir(*target)) {
        if (!src_is_dir) {
          return ErrnoStatus(
              EISDIR, absl::StrCat("rename: target \"", request.new_name(), "\" is a directory"));
        }
        absl::StatusOr<bool> has_entries = txn.DirHasEntries(target->attr().ino());
        if (!has_entries.ok()) return has_entries.status();
        if (*has_entries) {
          return ErrnoStatus(ENOTEMPTY, absl::StrCat("rename: target directory \"",
                                                     request.new_name(), "\" is not empty"));
        }
      } else if (src_is_dir) {
        return ErrnoStatus(ENOTDIR, absl::StrCat("rename: target \"", request.new_name(),
                                                 "\" is not a directory"));
      }
      dst = *std::move(target);
    }
    if (src_is_dir && !same_parent) {
      if (absl::Status ok = CheckNotUnder(txn, new_parent_ino, src->attr().ino()); !ok.ok()) {
        return ok;
      }
    }

    const int64_t now = clock_->NowNs();
    txn.Delete(DentryKey(old_parent_ino, request.name()));
    txn.Put(DentryKey(new_parent_ino, request.new_name()), MakeDentry(*src));
    src->mutable_attr()->set_ctime_ns(now);
    if (!src_is_dir && !hard_linked) src->set_in_checkpoint(new_checkpoint);
    if (IsCheckpointDir(*src)) {
      src->mutable_checkpoint()->mutable_info()->set_name(request.new_name());
    }
    if (src_is_dir) {
      src->set_parent(new_parent_ino);
      if (!same_parent) {
        old_parent->mutable_attr()->set_nlink(old_parent->attr().nlink() - 1);
        new_parent->mutable_attr()->set_nlink(new_parent->attr().nlink() + 1);
      }
    }
    txn.PutInode(*src);
    if (dst.has_value()) {
      if (IsDir(*dst)) new_parent->mutable_attr()->set_nlink(new_parent->attr().nlink() - 1);
      if (absl::Status released = ReleaseInode(txn, *std::move(dst), now, options_.orphan_grace);
          !released.ok()) {
        return released;
      }
    }
    TouchDir(*old_parent, now);
    txn.PutInode(*old_parent);
    if (!same_parent) {
      TouchDir(*new_parent, now);
      txn.PutInode(*new_parent);
    }
    return absl::OkStatus();
  });
}

}  // namespace ckptfs::meta
