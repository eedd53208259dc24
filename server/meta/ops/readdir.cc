// Namespace::ReadDir: one page of a directory's entries, in bytewise name
// order, straight from a prefix scan of its dentries.
#include <algorithm>
#include <cerrno>

#include "common/errno_status.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {
constexpr size_t kMaxReadDirReplyBytes = 1u << 20;
constexpr size_t kDirEntryOverhead = 16;  // ino, type and protobuf framing
}  // namespace

absl::StatusOr<ReadDirReply> Namespace::ReadDir(uint64_t ino, absl::string_view start_after,
                                                uint32_t limit) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
  if (!dir.ok()) return dir.status();
  size_t page = limit == 0 ? options_.readdir_default_limit
                           : std::min(limit, options_.readdir_max_limit);
  page = std::max<size_t>(page, 1);
  const std::string prefix = DentryPrefix(ino);
  // One extra entry tells whether more follow.
  absl::StatusOr<std::vector<KeyValue>> entries = kv_->Scan(prefix, start_after, page + 1);
  if (!entries.ok()) return entries.status();
  ReadDirReply reply;
  reply.set_more(entries->size() > page);
  if (entries->size() > page) entries->resize(page);
  size_t reply_bytes = 0;
  for (const KeyValue& kv : *entries) {
    // Long names could push a full page past gRPC's 4 MiB message limit:
    // end the page early instead (the caller follows `more`).
    reply_bytes += kv.key.size() - prefix.size() + kDirEntryOverhead;
    if (reply_bytes > kMaxReadDirReplyBytes && reply.entries_size() > 0) {
      reply.set_more(true);
      break;
    }
    DentryRecord dentry;
    if (!dentry.ParseFromString(kv.value)) {
      return ErrnoStatus(EIO, "corrupt directory entry record");
    }
    DirEntry* entry = reply.add_entries();
    entry->set_name(kv.key.substr(prefix.size()));
    entry->set_ino(dentry.ino());
    entry->set_type(dentry.type());
  }
  return reply;
}

}  // namespace ckptfs::meta
