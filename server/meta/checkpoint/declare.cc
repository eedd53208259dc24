// CheckpointStore::Declare and Arrive: turning a directory into a PENDING
// checkpoint, and recording the ranks that reach its commit barrier.
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/checkpoint/subtree.h"
#include "server/meta/checkpoint/xattr_rules.h"
#include "server/meta/keys.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

// The stored commit_timeout_s of `inode`, if it has a valid one.
std::optional<uint32_t> StoredTimeout(const InodeRecord& inode) {
  auto it = inode.xattrs().find(std::string(kCommitTimeoutXattr));
  if (it == inode.xattrs().end()) return std::nullopt;
  return ParsePositiveDecimal(it->second);
}

absl::Status NotACheckpoint(uint64_t ino) {
  return ErrnoStatus(EINVAL, absl::StrCat("directory ", ino,
                                          " is not a declared checkpoint (set "
                                          "user.ckptfs.ranks first)"));
}

}  // namespace

absl::StatusOr<CheckpointInfo> CheckpointStore::Declare(const DeclareCheckpointRequest& request) {
  const uint64_t ino = request.ino();
  if (request.ranks() < 1 || request.ranks() > kMaxCheckpointRanks) {
    return ErrnoStatus(EINVAL, absl::StrCat("a checkpoint has 1..", kMaxCheckpointRanks,
                                            " ranks, not ", request.ranks()));
  }
  if (ino == kRootIno) {
    return ErrnoStatus(EINVAL, "the root directory cannot be a checkpoint");
  }
  return RunTxn<CheckpointInfo>(
      kv_, "declare checkpoint", [&](MetaTxn& txn) -> absl::StatusOr<CheckpointInfo> {
        absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
        if (!dir.ok()) return dir.status();
        if (IsCheckpointDir(*dir)) {
          const CheckpointInfo& info = dir->checkpoint().info();
          if (info.ranks() != request.ranks()) {
            return ErrnoStatus(EINVAL, absl::StrCat("checkpoint ", ino, " is declared for ",
                                                    info.ranks(), " ranks, not ", request.ranks()));
          }
          return info;  // harmless re-declaration: commits only the compare
        }
        if (dir->in_checkpoint() != 0) {
          return ErrnoStatus(EINVAL,
                             absl::StrCat("directory ", ino, " is inside checkpoint ",
                                          dir->in_checkpoint(), "; checkpoints do not nest"));
        }
        absl::StatusOr<InodeRecord> parent = GetDir(txn, dir->parent());
        if (!parent.ok()) return parent.status();
        absl::StatusOr<std::string> name = NameInParent(txn, dir->parent(), ino);
        if (!name.ok()) return name.status();
        absl::StatusOr<std::vector<SubtreeEntry>> subtree = ReadSubtree(txn, ino);
        if (!subtree.ok()) return subtree.status();
        for (SubtreeEntry& entry : *subtree) {
          if (IsCheckpointDir(entry.inode)) {
            return ErrnoStatus(EINVAL, absl::StrCat("directory ", ino, " holds checkpoint \"",
                                                    entry.path, "\"; checkpoints do not nest"));
          }
          // A hard link to a file of another checkpoint (ops/link.cc): that
          // one governs it, and an inode belongs to one checkpoint at most.
          if (entry.inode.in_checkpoint() != 0 && entry.inode.in_checkpoint() != ino) {
            absl::StatusOr<CheckpointState> other = GoverningState(txn, entry.inode);
            if (!other.ok()) return other.status();
            if (*other != CHECKPOINT_STATE_UNSPECIFIED) {
              return ErrnoStatus(
                  EINVAL,
                  absl::StrCat(
                      "directory ", ino, " holds \"", entry.path,
                      "\", a hard link to a file of "
                      "checkpoint ",
                      entry.inode.in_checkpoint(),
                      "; a file belongs to one "
                      "checkpoint at most (copy it, or remove the link, before declaring)"));
            }
          }
          entry.inode.set_in_checkpoint(ino);
          txn.PutInode(entry.inode);
        }
        uint32_t timeout_s = request.timeout_s();
        if (timeout_s == 0) {
          timeout_s = StoredTimeout(*dir).value_or(
              StoredTimeout(*parent).value_or(options_.default_timeout_s));
        }
        CheckpointInfo* info = dir->mutable_checkpoint()->mutable_info();
        info->set_ino(ino);
        info->set_name(*name);
        info->set_state(PENDING);
        info->set_ranks(request.ranks());
        info->set_declared_ms(clock_->NowMs());
        info->set_timeout_s(timeout_s);
        dir->mutable_attr()->set_ctime_ns(clock_->NowNs());
        txn.PutInode(*dir);
        txn.PutRaw(PendingCheckpointKey(ino), "");
        return *info;
      });
}

absl::StatusOr<CheckpointInfo> CheckpointStore::Arrive(uint64_t ino, uint32_t rank) {
  return RunTxn<CheckpointInfo>(
      kv_, "record commit arrival", [&](MetaTxn& txn) -> absl::StatusOr<CheckpointInfo> {
        absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
        if (!dir.ok()) return dir.status();
        if (!IsCheckpointDir(*dir)) return NotACheckpoint(ino);
        CheckpointInfo* info = dir->mutable_checkpoint()->mutable_info();
        if (rank >= info->ranks()) {
          return ErrnoStatus(EINVAL, absl::StrCat("rank ", rank, " is out of range: checkpoint ",
                                                  ino, " has ranks 0..", info->ranks() - 1));
        }
        if (info->state() != PENDING) return *info;
        const std::string key = ArrivalKey(ino, rank);
        absl::StatusOr<std::optional<std::string>> arrived = txn.Get(key);
        if (!arrived.ok()) return arrived.status();
        const int64_t now_ms = clock_->NowMs();
        if (!arrived->has_value()) txn.PutRaw(key, EncodeU64(static_cast<uint64_t>(now_ms)));
        if (info->first_commit_ms() == 0) {
          info->set_first_commit_ms(now_ms);
          txn.PutInode(*dir);
        }
        return *info;
      });
}

}  // namespace ckptfs::meta
