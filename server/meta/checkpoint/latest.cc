// See latest.h.
#include "server/meta/checkpoint/latest.h"

#include <cerrno>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/reserved_xattrs.h"
#include "server/meta/checkpoint/xattr_rules.h"
#include "server/meta/keys.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

// The inode entry `name` of `run_dir` names: nullopt if there is no such
// entry.
absl::StatusOr<std::optional<InodeRecord>> ReadEntry(MetaTxn& txn, uint64_t run_dir,
                                                     absl::string_view name) {
  absl::StatusOr<std::optional<DentryRecord>> dentry = txn.GetDentry(run_dir, name);
  if (!dentry.ok()) return dentry.status();
  if (!dentry->has_value()) return std::optional<InodeRecord>();
  absl::StatusOr<InodeRecord> inode = txn.GetInode((*dentry)->ino());
  if (!inode.ok()) return inode.status();
  return std::optional<InodeRecord>(*std::move(inode));
}

// PointLatestAt under the pointer name `name`.
absl::Status PointAt(MetaTxn& txn, InodeAllocator& inodes, std::optional<uint64_t>& new_ino,
                     InodeRecord& run_dir, absl::string_view name, absl::string_view target,
                     int64_t now_ns, int64_t& inode_delta) {
  const uint64_t dir_ino = run_dir.attr().ino();
  absl::StatusOr<std::optional<InodeRecord>> latest = ReadEntry(txn, dir_ino, name);
  if (!latest.ok()) return latest.status();
  if (latest->has_value()) {
    InodeRecord& link = **latest;
    if (link.attr().type() != SYMLINK) {
      CKPTFS_LOG(kWarning) << "directory " << dir_ino << " holds a \"" << absl::CEscape(name)
                           << "\" that is not a symlink; leaving it alone instead of pointing "
                           << "it at checkpoint " << target;
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
  txn.Put(DentryKey(dir_ino, name), MakeDentry(link));
  TouchDir(run_dir, now_ns);
  txn.PutInode(run_dir);
  ++inode_delta;
  return absl::OkStatus();
}

// RemoveLatest of the pointer name `name`.
absl::Status RemoveSymlink(MetaTxn& txn, InodeRecord& run_dir, absl::string_view name,
                           int64_t now_ns, int64_t& inode_delta) {
  const uint64_t dir_ino = run_dir.attr().ino();
  absl::StatusOr<std::optional<InodeRecord>> latest = ReadEntry(txn, dir_ino, name);
  if (!latest.ok()) return latest.status();
  if (!latest->has_value() || (*latest)->attr().type() != SYMLINK) return absl::OkStatus();
  txn.Delete(DentryKey(dir_ino, name));
  txn.Delete(InodeKey((*latest)->attr().ino()));
  TouchDir(run_dir, now_ns);
  txn.PutInode(run_dir);
  --inode_delta;
  return absl::OkStatus();
}

absl::string_view KindOf(const InodeRecord& inode) {
  switch (inode.attr().type()) {
    case REGULAR:
      return "a regular file";
    case DIRECTORY:
      return "a directory";
    default:
      return "an entry";
  }
}

}  // namespace

std::optional<std::string> LatestPointerName(const InodeRecord& run_dir) {
  auto it = run_dir.xattrs().find(std::string(kLatestNameXattr));
  if (it == run_dir.xattrs().end()) return std::string(kDefaultLatestName);
  absl::StatusOr<std::optional<std::string>> name = ParseLatestName(it->second);
  if (!name.ok()) return std::nullopt;
  return *std::move(name);
}

absl::Status PointLatestAt(MetaTxn& txn, InodeAllocator& inodes, std::optional<uint64_t>& new_ino,
                           InodeRecord& run_dir, absl::string_view target, int64_t now_ns,
                           int64_t& inode_delta) {
  const std::optional<std::string> name = LatestPointerName(run_dir);
  if (!name.has_value()) return absl::OkStatus();
  return PointAt(txn, inodes, new_ino, run_dir, *name, target, now_ns, inode_delta);
}

absl::Status RemoveLatest(MetaTxn& txn, InodeRecord& run_dir, int64_t now_ns,
                          int64_t& inode_delta) {
  const std::optional<std::string> name = LatestPointerName(run_dir);
  if (!name.has_value()) return absl::OkStatus();
  return RemoveSymlink(txn, run_dir, *name, now_ns, inode_delta);
}

absl::StatusOr<std::optional<std::string>> LatestTarget(MetaTxn& txn, const InodeRecord& run_dir) {
  const std::optional<std::string> name = LatestPointerName(run_dir);
  if (!name.has_value()) return std::optional<std::string>();
  absl::StatusOr<std::optional<InodeRecord>> latest = ReadEntry(txn, run_dir.attr().ino(), *name);
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

absl::Status MoveLatestOff(MetaTxn& txn, InodeAllocator& inodes, std::optional<uint64_t>& new_ino,
                           InodeRecord& run_dir, absl::string_view name, uint64_t ckpt,
                           int64_t now_ns, int64_t& inode_delta) {
  absl::StatusOr<std::optional<std::string>> latest = LatestTarget(txn, run_dir);
  if (!latest.ok()) return latest.status();
  if (!latest->has_value() || **latest != name) return absl::OkStatus();
  absl::StatusOr<std::optional<std::string>> newest =
      NewestCommitted(txn, run_dir.attr().ino(), ckpt);
  if (!newest.ok()) return newest.status();
  if (!newest->has_value()) return RemoveLatest(txn, run_dir, now_ns, inode_delta);
  return PointLatestAt(txn, inodes, new_ino, run_dir, **newest, now_ns, inode_delta);
}

absl::Status RenameLatest(MetaTxn& txn, InodeAllocator& inodes, std::optional<uint64_t>& new_ino,
                          InodeRecord& run_dir, const std::optional<std::string>& from,
                          const std::optional<std::string>& to, int64_t now_ns,
                          int64_t& inode_delta) {
  if (from == to) return absl::OkStatus();
  const uint64_t dir_ino = run_dir.attr().ino();
  if (to.has_value()) {
    absl::StatusOr<std::optional<InodeRecord>> taken = ReadEntry(txn, dir_ino, *to);
    if (!taken.ok()) return taken.status();
    if (taken->has_value() && (*taken)->attr().type() != SYMLINK) {
      return ErrnoStatus(
          EEXIST, absl::StrCat(kLatestNameXattr, ": \"", absl::CEscape(*to), "\" in directory ",
                               dir_ino, " is ", KindOf(**taken),
                               ", not a symlink ckptfs may keep pointing at the newest "
                               "checkpoint; remove or rename it first, or choose another name "
                               "(\"\" for no symlink)"));
    }
  }
  if (from.has_value()) {
    if (absl::Status removed = RemoveSymlink(txn, run_dir, *from, now_ns, inode_delta);
        !removed.ok()) {
      return removed;
    }
  }
  if (!to.has_value()) return absl::OkStatus();
  absl::StatusOr<std::optional<std::string>> newest = NewestCommitted(txn, dir_ino, 0);
  if (!newest.ok()) return newest.status();
  if (!newest->has_value()) return absl::OkStatus();
  return PointAt(txn, inodes, new_ino, run_dir, *to, **newest, now_ns, inode_delta);
}

}  // namespace ckptfs::meta
