// See subtree.h.
#include "server/meta/checkpoint/subtree.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/keys.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

constexpr size_t kScanPage = 1024;
constexpr size_t kMaxDepth = 4096;

// Every entry of directory `dir`, in name order.
absl::StatusOr<std::vector<std::pair<std::string, DentryRecord>>> ListEntries(MetaTxn& txn,
                                                                              uint64_t dir) {
  std::vector<std::pair<std::string, DentryRecord>> entries;
  const std::string prefix = DentryPrefix(dir);
  std::string start_after;
  while (true) {
    absl::StatusOr<std::vector<KeyValue>> page = txn.kv()->Scan(prefix, start_after, kScanPage);
    if (!page.ok()) return page.status();
    for (const KeyValue& kv : *page) {
      DentryRecord dentry;
      if (!dentry.ParseFromString(kv.value)) {
        return ErrnoStatus(EIO, "corrupt directory entry record");
      }
      entries.emplace_back(kv.key.substr(prefix.size()), std::move(dentry));
    }
    if (page->size() < kScanPage) break;
    start_after = page->back().key.substr(prefix.size());
  }
  return entries;
}

// Read-ahead pays off from this many inodes of one directory, and while
// the scanned range holds at most this many keys per inode wanted.
constexpr size_t kMinReadAhead = 32;
constexpr uint64_t kMaxReadAheadSpread = 2;

}  // namespace

absl::Status ReadInodesAhead(MetaTxn& txn, const std::vector<uint64_t>& inos) {
  if (inos.size() < kMinReadAhead) return absl::OkStatus();
  const auto [lowest, highest] = std::minmax_element(inos.begin(), inos.end());
  if (*lowest == 0) return absl::OkStatus();
  const uint64_t span = *highest - *lowest + 1;
  if (span > kMaxReadAheadSpread * inos.size()) return absl::OkStatus();
  // Keys strictly after the one below `lowest`, in pages, each in key order.
  std::string start_after = EncodeU64(*lowest - 1);
  uint64_t left = span;
  while (left > 0) {
    const size_t page = static_cast<size_t>(std::min<uint64_t>(left, kScanPage));
    absl::StatusOr<std::vector<KeyValue>> read = txn.kv()->Scan(kInodePrefix, start_after, page);
    if (!read.ok()) return read.status();
    const bool last = read->size() < page;
    if (!read->empty()) {
      start_after = read->back().key.substr(kInodePrefix.size());
      txn.ReadAhead(*std::move(read));
    }
    if (last) break;
    left -= page;
  }
  return absl::OkStatus();
}

absl::Status VisitSubtree(MetaTxn& txn, uint64_t root, bool read_ahead,
                          absl::FunctionRef<absl::Status(SubtreeEntry&)> visit) {
  // (directory, its path, its depth); a stack, so the walk is depth-first.
  struct Pending {
    uint64_t dir;
    std::string path;
    size_t depth;
  };
  std::vector<Pending> stack = {{root, "", 0}};
  SubtreeEntry entry;  // reused: a visit may take its contents
  while (!stack.empty()) {
    Pending current = std::move(stack.back());
    stack.pop_back();
    if (current.depth >= kMaxDepth) {
      return ErrnoStatus(
          ELOOP, absl::StrCat("directory tree under inode ", root, " is deeper than ", kMaxDepth));
    }
    absl::StatusOr<std::vector<std::pair<std::string, DentryRecord>>> entries =
        ListEntries(txn, current.dir);
    if (!entries.ok()) return entries.status();
    if (read_ahead) {
      std::vector<uint64_t> inos;
      inos.reserve(entries->size());
      for (const auto& [name, dentry] : *entries) inos.push_back(dentry.ino());
      if (absl::Status read = ReadInodesAhead(txn, inos); !read.ok()) return read;
    }
    for (auto& [name, dentry] : *entries) {
      absl::StatusOr<InodeRecord> inode = txn.GetInode(dentry.ino());
      if (!inode.ok()) return inode.status();
      entry.parent = current.dir;
      entry.path = current.path.empty() ? name : absl::StrCat(current.path, "/", name);
      entry.name = std::move(name);
      entry.inode.Swap(&*inode);
      if (IsDir(entry.inode)) {
        stack.push_back({entry.inode.attr().ino(), entry.path, current.depth + 1});
      }
      if (absl::Status visited = visit(entry); !visited.ok()) return visited;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SubtreeEntry>> ReadSubtree(MetaTxn& txn, uint64_t root,
                                                      bool read_ahead) {
  std::vector<SubtreeEntry> out;
  absl::Status walked = VisitSubtree(txn, root, read_ahead, [&out](SubtreeEntry& entry) {
    // Built in place and swapped into: an InodeRecord costs to construct.
    SubtreeEntry& kept = out.emplace_back();
    kept.parent = entry.parent;
    kept.name = std::move(entry.name);
    kept.path = std::move(entry.path);
    kept.inode.Swap(&entry.inode);
    return absl::OkStatus();
  });
  if (!walked.ok()) return walked;
  return out;
}

absl::StatusOr<std::string> NameInParent(MetaTxn& txn, uint64_t parent, uint64_t ino) {
  absl::StatusOr<std::vector<std::pair<std::string, DentryRecord>>> entries =
      ListEntries(txn, parent);
  if (!entries.ok()) return entries.status();
  for (const auto& [name, dentry] : *entries) {
    if (dentry.ino() == ino) return name;
  }
  return ErrnoStatus(ENOENT, absl::StrCat("directory ", parent, " has no entry for inode ", ino));
}

int64_t StageSubtreeRemoval(MetaTxn& txn, const std::vector<SubtreeEntry>& entries, int64_t now_ms,
                            int64_t grace_ms) {
  // The names each inode loses here: a file linked several times inside the
  // subtree is seen once per name, and one linked from outside keeps those.
  absl::flat_hash_map<uint64_t, uint32_t> names_removed;
  for (const SubtreeEntry& entry : entries) {
    txn.Delete(DentryKey(entry.parent, entry.name));
    if (entry.inode.attr().type() != DIRECTORY) ++names_removed[entry.inode.attr().ino()];
  }
  int64_t deleted = 0;
  for (const SubtreeEntry& entry : entries) {
    const uint64_t ino = entry.inode.attr().ino();
    if (entry.inode.attr().type() == DIRECTORY) {
      txn.Delete(InodeKey(ino));
      ++deleted;
      continue;
    }
    auto removed = names_removed.find(ino);
    if (removed == names_removed.end()) continue;  // staged at its first name
    const uint32_t nlink = entry.inode.attr().nlink();
    const uint32_t names_left = nlink > removed->second ? nlink - removed->second : 0;
    names_removed.erase(removed);
    if (names_left > 0) {  // hard links outside the subtree keep the inode
      InodeRecord kept = entry.inode;
      kept.mutable_attr()->set_nlink(names_left);
      kept.mutable_attr()->set_ctime_ns(now_ms * 1'000'000);
      txn.PutInode(kept);
      continue;
    }
    if (entry.inode.attr().type() != REGULAR) {
      txn.Delete(InodeKey(ino));
      ++deleted;
      continue;
    }
    // As ReleaseInode, but kept through the grace only while a reader holds
    // the file, or whole if a writer may still be writing (its writes in
    // flight would recreate chunks after an earlier trim).
    InodeRecord file = entry.inode;
    file.mutable_attr()->set_nlink(0);
    file.mutable_attr()->set_ctime_ns(now_ms * 1'000'000);
    txn.PutInode(file);
    OrphanRecord orphan;
    *orphan.mutable_layout() = file.attr().layout();
    orphan.set_size(file.attr().size());
    orphan.set_reclaim_after_ms(now_ms + grace_ms);
    orphan.set_reclaim_when_unread(file.writer_handles_size() == 0);
    txn.Put(OrphanKey(ino), orphan);
  }
  return deleted;
}

}  // namespace ckptfs::meta
