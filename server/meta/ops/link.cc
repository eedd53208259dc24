// Namespace::Link: a new name for an existing inode (link(2)), in one
// transaction: the dentry, the inode's nlink and ctime, and the new parent's
// times.
//
// Checkpoints: every name of an inode lies in the subtree of the checkpoint
// that governs it (InodeRecord.in_checkpoint) or outside every checkpoint.
// So a link within one pending checkpoint, or outside all of them, is made;
// a file of an ended (committed or being removed) checkpoint may also get
// names outside every checkpoint — `cp -al` or `rsync --link-dest` of a run
// directory — and stays governed by its checkpoint: unchangeable while the
// checkpoint lasts, and its data kept after the checkpoint is removed for as
// long as such a name reaches it (removal takes a name, not the inode).
// Anything else would put one inode in two checkpoints, or a checkpoint's
// file outside it while it is still being written: EXDEV. A new name inside
// an ended checkpoint is EROFS, as every change there.
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

// The most names one inode takes (ext4's limit): EMLINK beyond it.
constexpr uint32_t kMaxLinks = 65000;

}  // namespace

absl::StatusOr<Attr> Namespace::Link(const LinkRequest& request) {
  if (absl::Status valid = ValidateNewName(request.new_name()); !valid.ok()) return valid;
  return RunTxn<Attr>(kv_, "link", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    absl::StatusOr<InodeRecord> parent = GetParentDir(txn, request.new_parent());
    if (!parent.ok()) return parent.status();
    if (absl::Status writable = RequireMutable(txn, *parent, "link"); !writable.ok()) {
      return writable;
    }
    absl::StatusOr<InodeRecord> inode = txn.GetInode(request.ino());
    if (!inode.ok()) return inode.status();
    if (IsDir(*inode)) {
      return ErrnoStatus(EPERM, absl::StrCat("link: inode ", request.ino(),
                                             " is a directory; directories take no hard links"));
    }
    if (inode->attr().nlink() == 0) {
      return ErrnoStatus(ENOENT, absl::StrCat("link: inode ", request.ino(),
                                              " has no name left (it was removed)"));
    }
    if (inode->attr().nlink() >= kMaxLinks) {
      return ErrnoStatus(EMLINK, absl::StrCat("link: inode ", request.ino(), " already has ",
                                              inode->attr().nlink(), " names, the most it takes"));
    }
    absl::StatusOr<CheckpointState> state = GoverningState(txn, *inode);
    if (!state.ok()) return state.status();
    // A checkpoint that is gone governs nothing any more.
    if (*state == CHECKPOINT_STATE_UNSPECIFIED) inode->set_in_checkpoint(0);
    const uint64_t from = inode->in_checkpoint();
    const uint64_t to = CheckpointOf(*parent);
    if (from != to && !(to == 0 && IsEnded(*state))) {
      const std::string why =
          from == 0
              ? absl::StrCat("directory ", request.new_parent(), " is inside checkpoint ", to,
                             " and the file is not")
              : absl::StrCat("the file belongs to ", EndedStateText(*state), " checkpoint ", from,
                             to == 0 ? ", which must be committed before its files get "
                                       "names outside it"
                                     : absl::StrCat(" and directory ", request.new_parent(),
                                                    " to checkpoint ", to));
      return ErrnoStatus(EXDEV, absl::StrCat("link: inode ", request.ino(),
                                             " cannot be linked "
                                             "into directory ",
                                             request.new_parent(), ": ", why));
    }
    if (absl::Status free = RequireFreeName(txn, request.new_parent(), request.new_name());
        !free.ok()) {
      return free;
    }
    const int64_t now = clock_->NowNs();
    inode->mutable_attr()->set_nlink(inode->attr().nlink() + 1);
    inode->mutable_attr()->set_ctime_ns(now);
    txn.PutInode(*inode);
    txn.Put(DentryKey(request.new_parent(), request.new_name()), MakeDentry(*inode));
    TouchDir(*parent, now);
    txn.PutInode(*parent);
    return inode->attr();
  });
}

}  // namespace ckptfs::meta
