// Namespace::DueOrphans and DropOrphan: the namespace side of reclaiming the
// chunks of files whose last name went (server/meta/orphan_reclaimer.h).
//
// An orphan reclaimed when unread (a removed checkpoint's file,
// OrphanRecord.reclaim_when_unread) is due before its reclaim_after_ms once
// no reader holds it (ops/reader_hold.cc). Whether one does is settled by a
// claim transaction that reads the orphan records first and the holds after:
// a reader's open of an orphan writes its record back, so an open that
// registers a hold after the claim read the record fails the claim's
// compare, and the claim looks again; an open after the claim finds the
// orphan due and fails (ENOENT) instead of reading chunks about to go.
#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"

namespace ckptfs::meta {
namespace {

constexpr size_t kPage = 256;

// The inodes in [first, last] with at least one reader hold: one scan of
// the h/ keys in that range (a removed checkpoint's files have neighbouring
// numbers), in pages.
absl::StatusOr<std::set<uint64_t>> HeldInodes(KvStore* kv, uint64_t first, uint64_t last) {
  std::set<uint64_t> held;
  // Every key of `first` sorts after its 8 bytes alone; those of first - 1
  // before them.
  std::string start_after = EncodeU64(first);
  while (true) {
    absl::StatusOr<std::vector<KeyValue>> page = kv->Scan(kReaderHoldPrefix, start_after, kPage);
    if (!page.ok()) return page.status();
    for (const KeyValue& hold : *page) {
      std::optional<uint64_t> ino = InoFromKey(hold.key);
      if (!ino.has_value()) return ErrnoStatus(EIO, "corrupt reader hold key");
      if (*ino > last) return held;
      held.insert(*ino);
    }
    if (page->size() < kPage) return held;
    start_after = page->back().key.substr(kReaderHoldPrefix.size());
  }
}

bool ByIno(const Namespace::DueOrphan& a, const Namespace::DueOrphan& b) { return a.ino < b.ino; }

}  // namespace

absl::StatusOr<std::vector<Namespace::DueOrphan>> Namespace::DueOrphans(uint64_t start_after_ino,
                                                                        size_t limit) {
  std::vector<DueOrphan> due;
  const int64_t now_ms = clock_->NowMs();
  std::string start_after = start_after_ino == 0 ? "" : EncodeU64(start_after_ino);
  // Pages of the o/ prefix until `limit` due orphans are found or none are left.
  while (due.size() < limit) {
    absl::StatusOr<std::vector<KeyValue>> page = kv_->Scan(kOrphanPrefix, start_after, kPage);
    if (!page.ok()) return page.status();
    std::vector<DueOrphan> found;
    std::vector<uint64_t> unread;  // reclaimed when unread, not due yet
    for (const KeyValue& kv : *page) {
      std::optional<uint64_t> ino = InoFromKey(kv.key);
      OrphanRecord record;
      if (!ino.has_value() || !record.ParseFromString(kv.value)) {
        return ErrnoStatus(EIO, "corrupt orphan record");
      }
      if (record.reclaim_after_ms() <= now_ms) {
        found.push_back(DueOrphan{*ino, std::move(record)});
      } else if (record.reclaim_when_unread()) {
        unread.push_back(*ino);
      }
    }
    absl::StatusOr<std::vector<DueOrphan>> claimed = ClaimUnread(unread, now_ms);
    if (!claimed.ok()) return claimed.status();
    const size_t before = found.size();
    found.insert(found.end(), std::make_move_iterator(claimed->begin()),
                 std::make_move_iterator(claimed->end()));
    std::inplace_merge(found.begin(), found.begin() + before, found.end(), ByIno);
    // Claimed orphans left over here are due by their time now: the next
    // call finds them.
    for (DueOrphan& orphan : found) {
      if (due.size() == limit) break;
      due.push_back(std::move(orphan));
    }
    if (page->size() < kPage) break;
    start_after = page->back().key.substr(kOrphanPrefix.size());
  }
  return due;
}

absl::StatusOr<std::vector<Namespace::DueOrphan>> Namespace::ClaimUnread(
    const std::vector<uint64_t>& candidates, int64_t now_ms) {
  if (candidates.empty()) return std::vector<DueOrphan>();
  return RunTxn<std::vector<DueOrphan>>(
      kv_, "claim unread orphans", [&](MetaTxn& txn) -> absl::StatusOr<std::vector<DueOrphan>> {
        // Records first (compared), holds after: see the top of this file.
        std::vector<DueOrphan> unheld;
        for (uint64_t ino : candidates) {
          absl::StatusOr<std::optional<OrphanRecord>> record =
              txn.GetRecord<OrphanRecord>(OrphanKey(ino));
          if (!record.ok()) return record.status();
          if (!record->has_value() || !(*record)->reclaim_when_unread()) continue;
          unheld.push_back(DueOrphan{ino, **std::move(record)});
        }
        if (unheld.empty()) return unheld;
        absl::StatusOr<std::set<uint64_t>> held =
            HeldInodes(txn.kv(), unheld.front().ino, unheld.back().ino);
        if (!held.ok()) return held.status();
        std::vector<DueOrphan> claimed;
        for (DueOrphan& orphan : unheld) {
          if (held->count(orphan.ino) > 0) continue;
          orphan.record.set_reclaim_after_ms(std::min(orphan.record.reclaim_after_ms(), now_ms));
          orphan.record.set_reclaim_when_unread(false);
          txn.Put(OrphanKey(orphan.ino), orphan.record);
          claimed.push_back(std::move(orphan));
        }
        return claimed;
      });
}

absl::Status Namespace::DropOrphan(uint64_t ino) {
  return RunTxn(kv_, "drop orphan", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<std::optional<std::string>> orphan = txn.Get(OrphanKey(ino));
    if (!orphan.ok()) return orphan.status();
    if (!orphan->has_value()) return absl::OkStatus();  // already dropped
    txn.Delete(OrphanKey(ino));
    // Holds of handles that outlived the grace: their release finds nothing.
    const std::string holds = ReaderHoldPrefix(ino);
    std::string start_after;
    while (true) {
      absl::StatusOr<std::vector<KeyValue>> page = txn.kv()->Scan(holds, start_after, kPage);
      if (!page.ok()) return page.status();
      for (const KeyValue& hold : *page) txn.Delete(hold.key);
      if (page->size() < kPage) break;
      start_after = page->back().key.substr(holds.size());
    }
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
