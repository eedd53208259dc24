// Namespace::DueOrphans and DropOrphan: the namespace side of reclaiming the
// chunks of files whose last name went (server/meta/orphan_reclaimer.h).
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"

namespace ckptfs::meta {

absl::StatusOr<std::vector<Namespace::DueOrphan>> Namespace::DueOrphans(uint64_t start_after_ino,
                                                                        size_t limit) {
  std::vector<DueOrphan> due;
  const int64_t now_ms = clock_->NowMs();
  std::string start_after = start_after_ino == 0 ? "" : EncodeU64(start_after_ino);
  // Pages of the o/ prefix until `limit` due orphans are found or none are left.
  constexpr size_t kPage = 256;
  while (due.size() < limit) {
    absl::StatusOr<std::vector<KeyValue>> page = kv_->Scan(kOrphanPrefix, start_after, kPage);
    if (!page.ok()) return page.status();
    for (const KeyValue& kv : *page) {
      std::optional<uint64_t> ino = InoFromKey(kv.key);
      OrphanRecord record;
      if (!ino.has_value() || !record.ParseFromString(kv.value)) {
        return ErrnoStatus(EIO, "corrupt orphan record");
      }
      if (record.reclaim_after_ms() <= now_ms && due.size() < limit) {
        due.push_back(DueOrphan{*ino, std::move(record)});
      }
    }
    if (page->size() < kPage) break;
    start_after = page->back().key.substr(kOrphanPrefix.size());
  }
  return due;
}

absl::Status Namespace::DropOrphan(uint64_t ino) {
  return RunTxn(kv_, "drop orphan", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<std::optional<std::string>> orphan = txn.Get(OrphanKey(ino));
    if (!orphan.ok()) return orphan.status();
    if (!orphan->has_value()) return absl::OkStatus();  // already dropped
    txn.Delete(OrphanKey(ino));
    absl::StatusOr<std::optional<InodeRecord>> inode = txn.GetRecord<InodeRecord>(InodeKey(ino));
    if (!inode.ok()) return inode.status();
    if (inode->has_value() && (*inode)->attr().nlink() == 0) {
      txn.Delete(InodeKey(ino));
      return txn.AddInodeCount(-1);
    }
    return absl::OkStatus();
  });
}

}  // namespace ckptfs::meta
