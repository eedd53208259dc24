// Namespace::ReadDir: one page of a directory's entries, in bytewise name
// order, from a prefix scan of its dentries. Subdirectories that are
// checkpoints but not COMMITTED ones (PENDING, ABORTED, REMOVING) are left
// out (a resume script listing a run directory sees committed checkpoints
// only); only directory entries cost an inode read for that.
#include <algorithm>
#include <cerrno>

#include "common/errno_status.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {
constexpr size_t kMaxReadDirReplyBytes = 1u << 20;
constexpr size_t kDirEntryOverhead = 16;  // ino, type and protobuf framing

// Whether directory entry `dentry` is listed.
absl::StatusOr<bool> Listed(KvStore* kv, const DentryRecord& dentry) {
  if (dentry.type() != DIRECTORY) return true;
  absl::StatusOr<std::optional<VersionedValue>> stored = kv->Get(InodeKey(dentry.ino()));
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return true;
  InodeRecord inode;
  if (!inode.ParseFromString((*stored)->value)) return ErrnoStatus(EIO, "corrupt inode record");
  const CheckpointState state = inode.checkpoint().info().state();
  return state == CHECKPOINT_STATE_UNSPECIFIED || state == COMMITTED;
}

}  // namespace

absl::StatusOr<ReadDirReply> Namespace::ReadDir(uint64_t ino, absl::string_view start_after,
                                                uint32_t limit) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
  if (!dir.ok()) return dir.status();
  size_t page =
      limit == 0 ? options_.readdir_default_limit : std::min(limit, options_.readdir_max_limit);
  page = std::max<size_t>(page, 1);
  const std::string prefix = DentryPrefix(ino);
  ReadDirReply reply;
  size_t reply_bytes = 0;
  std::string after(start_after);
  // Hidden entries leave room in the page: scan on until it is full or the
  // directory ends, so that a page is never empty while entries follow.
  while (true) {
    // One extra entry tells whether more follow.
    const size_t want = page - static_cast<size_t>(reply.entries_size());
    absl::StatusOr<std::vector<KeyValue>> entries = kv_->Scan(prefix, after, want + 1);
    if (!entries.ok()) return entries.status();
    const bool more = entries->size() > want;
    if (more) entries->resize(want);
    for (const KeyValue& kv : *entries) {
      // Long names could push a full page past gRPC's 4 MiB message limit:
      // end the page early instead (the caller follows `more`).
      if (reply_bytes + kv.key.size() - prefix.size() + kDirEntryOverhead > kMaxReadDirReplyBytes &&
          reply.entries_size() > 0) {
        reply.set_more(true);
        return reply;
      }
      DentryRecord dentry;
      if (!dentry.ParseFromString(kv.value)) {
        return ErrnoStatus(EIO, "corrupt directory entry record");
      }
      after = kv.key.substr(prefix.size());
      absl::StatusOr<bool> listed = Listed(kv_, dentry);
      if (!listed.ok()) return listed.status();
      if (!*listed) continue;
      reply_bytes += after.size() + kDirEntryOverhead;
      DirEntry* entry = reply.add_entries();
      entry->set_name(after);
      entry->set_ino(dentry.ino());
      entry->set_type(dentry.type());
    }
    if (!more) {
      reply.set_more(false);
      return reply;
    }
    if (static_cast<size_t>(reply.entries_size()) >= page) {
      reply.set_more(true);
      return reply;
    }
  }
}

}  // namespace ckptfs::meta
