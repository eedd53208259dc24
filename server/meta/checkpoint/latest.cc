// See latest.h.
#include "server/meta/checkpoint/latest.h"

#include "common/errno_status.h"
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

absl::StatusOr<std::optional<std::string>> NewestCommitted(MetaTxn& txn, uint64_t run_dir,
                                                           uint64_t except) {
  const std::string prefix = DentryPrefix(run_dir);
  std::optional<std::string> newest;
  int64_t newest_ms = 0;
  std::string start_after;
  constexpr size_t kPage = 1024;
  while (true) {
    absl::StatusOr<std::vector<KeyValue>> page = txn.kv()->Scan(prefix, start_after, kPage);
    if (!page.ok()) return page.status();
    for (const KeyValue& entry : *page) {
      DentryRecord dentry;
      if (!dentry.ParseFromString(entry.value)) {
        return ErrnoStatus(EIO, "corrupt directory entry record");
      }
      if (dentry.type() != DIRECTORY || dentry.ino() == except) continue;
      absl::StatusOr<InodeRecord> child = txn.GetInode(dentry.ino());
      if (!child.ok()) return child.status();
      const CheckpointInfo& info = child->checkpoint().info();
      if (info.state() != COMMITTED) continue;
      if (!newest.has_value() || info.ended_ms() >= newest_ms) {
        newest = entry.key.substr(prefix.size());
        newest_ms = info.ended_ms();
      }
    }
    if (page->size() < kPage) break;
    start_after = page->back().key.substr(prefix.size());
  }
  return newest;
}

absl::Status MoveLatestOff(MetaTxn& txn, InodeAllocator& inodes,
                           std::optional<uint64_t>& new_ino, InodeRecord& run_dir,
                           absl::string_view name, uint64_t ckpt, int64_t now_ns,
                           int64_t& inode_delta) {
  const uint64_t dir_ino = run_dir.attr().ino();
  absl::StatusOr<std::optional<std::string>> latest = LatestTarget(txn, dir_ino);
  if (!latest.ok()) return latest.status();
  if (!latest->has_value() || **latest != name) return absl::OkStatus();
  absl::StatusOr<std::optional<std::string>> newest = NewestCommitted(txn, dir_ino, ckpt);
  if (!newest.ok()) return newest.status();
  if (!newest->has_value()) return RemoveLatest(txn, run_dir, now_ns, inode_delta);
  return PointLatestAt(txn, inodes, new_ino, run_dir, **newest, now_ns, inode_delta);
}

}  // namespace ckptfs::meta
