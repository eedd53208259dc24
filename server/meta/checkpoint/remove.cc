// CheckpointStore::Remove and Retain: deleting whole checkpoints, by request
// or by a run directory's retention (user.ckptfs.keep), which takes only
// checkpoints of the owner of the one whose commit applies it.
#include <algorithm>
#include <cerrno>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/checkpoint/latest.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/checkpoint/subtree.h"
#include "server/meta/checkpoint/xattr_rules.h"
#include "server/meta/keys.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {

absl::StatusOr<uint64_t> CheckpointStore::Remove(uint64_t run_dir, absl::string_view name,
                                                 const RemoveOnly* only) {
  if (absl::Status valid = ValidateName(name); !valid.ok()) return valid;
  std::optional<uint64_t> latest_ino;  // allocated once, kept across retries
  return RunTxn<uint64_t>(kv_, "remove checkpoint", [&](MetaTxn& txn) -> absl::StatusOr<uint64_t> {
    absl::StatusOr<InodeRecord> parent = GetDir(txn, run_dir);
    if (!parent.ok()) return parent.status();
    absl::StatusOr<std::optional<DentryRecord>> dentry = txn.GetDentry(run_dir, name);
    if (!dentry.ok()) return dentry.status();
    if (!dentry->has_value()) {
      return ErrnoStatus(ENOENT, absl::StrCat("no entry \"", name, "\" in directory ", run_dir));
    }
    absl::StatusOr<InodeRecord> dir = txn.GetInode((*dentry)->ino());
    if (!dir.ok()) return dir.status();
    const uint64_t ino = dir->attr().ino();
    if (!IsCheckpointDir(*dir)) {
      return ErrnoStatus(
          EINVAL, absl::StrCat("\"", name, "\" in directory ", run_dir, " is not a checkpoint"));
    }
    if (only != nullptr &&
        (ino != only->ino || (only->state != CHECKPOINT_STATE_UNSPECIFIED &&
                              dir->checkpoint().info().state() != only->state))) {
      return ErrnoStatus(ESTALE, absl::StrCat("\"", name, "\" in directory ", run_dir,
                                              " is no longer the checkpoint to remove"));
    }
    absl::StatusOr<std::vector<SubtreeEntry>> subtree = ReadSubtree(txn, ino);
    if (!subtree.ok()) return subtree.status();
    const int64_t now_ns = clock_->NowNs();
    int64_t inode_delta = -StageSubtreeRemoval(txn, *subtree, now_ns / 1'000'000, BusyGraceMs());
    txn.Delete(DentryKey(run_dir, name));
    txn.Delete(InodeKey(ino));
    txn.Delete(PendingCheckpointKey(ino));
    --inode_delta;
    parent->mutable_attr()->set_nlink(parent->attr().nlink() - 1);
    TouchDir(*parent, now_ns);
    txn.PutInode(*parent);
    if (absl::Status moved =
            MoveLatestOff(txn, *inodes_, latest_ino, *parent, name, ino, now_ns, inode_delta);
        !moved.ok()) {
      return moved;
    }
    if (absl::Status count = txn.AddInodeCount(inode_delta); !count.ok()) return count;
    return ino;
  });
}

namespace {

// Which of `checkpoints` (still there) have owner `uid`.
absl::StatusOr<absl::flat_hash_set<uint64_t>> OwnedBy(
    KvStore* kv, const google::protobuf::RepeatedPtrField<CheckpointInfo>& checkpoints,
    uint32_t uid) {
  MetaTxn txn(kv);
  absl::flat_hash_set<uint64_t> owned;
  for (const CheckpointInfo& info : checkpoints) {
    absl::StatusOr<std::optional<InodeRecord>> inode =
        txn.GetRecord<InodeRecord>(InodeKey(info.ino()));
    if (!inode.ok()) return inode.status();
    if (inode->has_value() && (*inode)->attr().uid() == uid) owned.insert(info.ino());
  }
  return owned;
}

}  // namespace

absl::StatusOr<std::vector<uint64_t>> CheckpointStore::Retain(uint64_t ckpt) {
  std::vector<uint64_t> removed;
  std::optional<uint32_t> keep;
  uint64_t run_dir = 0;
  uint32_t owner = 0;
  {
    MetaTxn txn(kv_);
    absl::StatusOr<InodeRecord> checkpoint = GetDir(txn, ckpt);
    if (!checkpoint.ok()) return checkpoint.status();
    run_dir = checkpoint->parent();
    owner = checkpoint->attr().uid();
    absl::StatusOr<InodeRecord> dir = GetDir(txn, run_dir);
    if (!dir.ok()) return dir.status();
    auto it = dir->xattrs().find(std::string(kKeepXattr));
    if (it != dir->xattrs().end()) keep = ParsePositiveDecimal(it->second);
  }
  if (!keep.has_value()) return removed;
  absl::StatusOr<ListCheckpointsReply> list = List(run_dir);
  if (!list.ok()) return list.status();
  std::vector<const CheckpointInfo*> committed, victims;
  // A checkpoint whose names are being removed right now (shutil.rmtree) is
  // left to its remover for a while: names vanishing under it would fail it.
  const int64_t removing_before_ms =
      clock_->NowMs() - absl::ToInt64Milliseconds(options_.removing_grace);
  // Only the checkpoints of the committed one's owner: one user's commit
  // never removes another's checkpoint, nor counts it among those kept.
  absl::StatusOr<absl::flat_hash_set<uint64_t>> owned = OwnedBy(kv_, list->checkpoints(), owner);
  if (!owned.ok()) return owned.status();
  for (const CheckpointInfo& info : list->checkpoints()) {
    if (!owned->contains(info.ino())) continue;
    if (info.state() == COMMITTED) committed.push_back(&info);
    if (info.state() == ABORTED) victims.push_back(&info);
    if (info.state() == REMOVING && info.removing_ms() <= removing_before_ms) {
      victims.push_back(&info);
    }
  }
  // Newest first; the checkpoint just committed always counts as the newest
  // (the wall clock may have stepped back, or two ended in one millisecond).
  std::sort(committed.begin(), committed.end(), [ckpt](const auto* a, const auto* b) {
    if ((a->ino() == ckpt) != (b->ino() == ckpt)) return a->ino() == ckpt;
    if (a->ended_ms() != b->ended_ms()) return a->ended_ms() > b->ended_ms();
    return a->name() > b->name();
  });
  for (size_t i = *keep; i < committed.size(); ++i) victims.push_back(committed[i]);
  for (const CheckpointInfo* victim : victims) {
    // Only the checkpoint listed, in the state listed: its name may have been
    // removed and reused since (a PENDING one is never retention's).
    const RemoveOnly only{victim->ino(), victim->state()};
    absl::StatusOr<uint64_t> ino = Remove(run_dir, victim->name(), &only);
    if (!ino.ok()) {
      const int err = ErrnoFromStatus(ino.status());
      if (err == ENOENT || err == EINVAL || err == ESTALE) continue;  // changed meanwhile
      return ino.status();
    }
    CKPTFS_LOG(kInfo) << "retention of directory " << run_dir << " (keep " << *keep << ") removed "
                      << EndedStateText(victim->state()) << " checkpoint " << victim->name();
    removed.push_back(*ino);
  }
  return removed;
}

}  // namespace ckptfs::meta
