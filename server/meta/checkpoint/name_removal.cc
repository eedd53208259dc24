// See name_removal.h.
#include "server/meta/checkpoint/name_removal.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/checkpoint/latest.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/keys.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {

absl::Status BeforeNameRemoval(MetaTxn& txn, InodeAllocator& inodes,
                               std::optional<uint64_t>& new_ino, InodeRecord& dir, int64_t now_ns) {
  const uint64_t ckpt_ino = CheckpointOf(dir);
  if (ckpt_ino == 0) return absl::OkStatus();
  // The checkpoint directory: `dir` itself, or read here (and staged here).
  std::optional<InodeRecord> read;
  InodeRecord* ckpt = &dir;
  if (ckpt_ino != dir.attr().ino()) {
    absl::StatusOr<std::optional<InodeRecord>> stored =
        txn.GetRecord<InodeRecord>(InodeKey(ckpt_ino));
    if (!stored.ok()) return stored.status();
    if (!stored->has_value()) return absl::OkStatus();  // gone: nothing governs `dir`
    read = **std::move(stored);
    ckpt = &*read;
  }
  CheckpointInfo* info = ckpt->mutable_checkpoint()->mutable_info();
  if (info->state() != COMMITTED) return absl::OkStatus();
  info->set_state(REMOVING);
  info->set_removing_ms(now_ns / 1'000'000);
  if (read.has_value()) txn.PutInode(*read);
  absl::StatusOr<InodeRecord> run_dir = GetDir(txn, ckpt->parent());
  if (!run_dir.ok()) return run_dir.status();
  int64_t inode_delta = 0;
  if (absl::Status moved = MoveLatestOff(txn, inodes, new_ino, *run_dir, info->name(), ckpt_ino,
                                         now_ns, inode_delta);
      !moved.ok()) {
    return moved;
  }
  if (inode_delta == 0) return absl::OkStatus();
  return txn.AddInodeCount(inode_delta);
}

absl::Status BeforeCheckpointDirRemoval(MetaTxn& txn, InodeAllocator& inodes,
                                        std::optional<uint64_t>& new_ino, const InodeRecord& ckpt,
                                        InodeRecord& run_dir, absl::string_view name,
                                        int64_t now_ns) {
  const uint64_t ino = ckpt.attr().ino();
  if (ckpt.checkpoint().info().state() == PENDING) {
    return ErrnoStatus(EBUSY, absl::StrCat("rmdir: directory ", ino, " (\"", name,
                                           "\") is a pending checkpoint; remove it with "
                                           "`ckptfs ckpt rm` (user.ckptfs.remove), or rmdir "
                                           "it once it has committed or aborted"));
  }
  int64_t inode_delta = 0;
  if (absl::Status moved =
          MoveLatestOff(txn, inodes, new_ino, run_dir, name, ino, now_ns, inode_delta);
      !moved.ok()) {
    return moved;
  }
  if (inode_delta == 0) return absl::OkStatus();
  return txn.AddInodeCount(inode_delta);
}

}  // namespace ckptfs::meta
