// See latest.h.
#include "server/meta/checkpoint/latest.h"

#include "common/log.h"
#include "server/meta/keys.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

// The inode `run_dir`'s "latest" names: nullopt if there is no such entry.
absl::StatusOr<std::optional<InodeRecord>> ReadLatest(MetaTxn& txn, uint64_t run_dir) {
  absl::StatusOr<std::optional<DentryRecord>> dentry = txn.GetDentry(run_dir, kLatestName);
  if (!dentry.ok()) return dentry.status();
  if (!dentry->has_value()) return std::optional<InodeRecord>();
  absl::StatusOr<InodeRecord> inode = txn.GetInode((*dentry)->ino());
  if (!inode.ok()) return inode.status();
  return std::optional<InodeRecord>(*std::move(inode));
}

}  // namespace

absl::Status PointLatestAt(MetaTxn& txn, InodeAllocator& inodes,
                           std::optional<uint64_t>& new_ino, InodeRecord& run_dir,
                           absl::string_view target, int64_t now_ns, int64_t& inode_delta) {
  const uint64_t dir_ino = run_dir.attr().ino();
  absl::StatusOr<std::optional<InodeRecord>> latest = ReadLatest(txn, dir_ino);
  if (!latest.ok()) return latest.status();
  if (latest->has_value()) {
    InodeRecord& link = **latest;
    if (link.attr().type() != SYMLINK) {
      CKPTFS_LOG(kWarning) << "directory " << dir_ino << " holds a \"latest\" that is not a "
                           << "symlink; leaving it alone instead of pointing it at checkpoint "
                           << target;
      return absl::OkStatus();
    }
    if (link.symlink_target() == target) return absl::OkStatus();
    // Replaced by a new inode rather than retargeted: mounts keep a
    // symlink's target for as long as they keep its inode (the kernel's
    // symlink cache), and a lookup that finds another inode under the name
    // is what makes them drop it.
    txn.Delete(InodeKey(link.attr().ino()));
    --inode_delta;
  }
  if (!new_ino.has_value()) {
    absl::StatusOr<uint64_t> ino = inodes.Allocate();
    if (!ino.ok()) return ino.status();
    new_ino = *ino;
  }
  InodeRecord link =
      NewInode(*new_ino, SYMLINK, 0777, run_dir.attr().uid(), run_dir.attr().gid(), now_ns);
  link.set_symlink_target(std::string(target));
  link.mutable_attr()->set_size(target.size());
  link.set_in_checkpoint(run_dir.in_checkpoint());
  txn.PutInode(link);
  txn.Put(DentryKey(dir_ino, kLatestName), MakeDentry(link));
  TouchDir(run_dir, now_ns);
  txn.PutInode(run_dir);
  ++inode_delta;
  return absl::OkStatus();
}

absl::Status RemoveLatest(MetaTxn& txn, InodeRecord& run_dir, int64_t now_ns,
                          int64_t& inode_delta) {
  const uint64_t dir_ino = run_dir.attr().ino();
  absl::StatusOr<std::optional<InodeRecord>> latest = ReadLatest(txn, dir_ino);
  if (!latest.ok()) return latest.status();
  if (!latest->has_value() || (*latest)->attr().type() != SYMLINK) return absl::OkStatus();
  txn.Delete(DentryKey(dir_ino, kLatestName));
  txn.Delete(InodeKey((*latest)->attr().ino()));
  TouchDir(run_dir, now_ns);
  txn.PutInode(run_dir);
  --inode_delta;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> LatestTarget(MetaTxn& txn, uint64_t run_dir) {
  absl::StatusOr<std::optional<InodeRecord>> latest = ReadLatest(txn, run_dir);
  if (!latest.ok()) return latest.status();
  if (!latest->has_value() || (*latest)->attr().type() != SYMLINK) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>((*latest)->symlink_target());
}

}  // namespace ckptfs::meta
