// Namespace::OpenToRead and ReleaseReader: the holds that read-only handles
// of checkpoint files keep on them, so that a checkpoint removed while a
// rank still loads it (retention, `ckptfs ckpt rm`, an abort) keeps the
// chunks of the files it has open, as an unlinked file's stay for its open
// handles. A hold is a key of its own per handle (h/<ino><handle>), so the
// opens of one file by many ranks never conflict with one another; the
// reclaimer (ops/orphan.cc) looks for holds before it trims a removed
// checkpoint's file, and the orphan grace bounds how long a hold counts.
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"

namespace ckptfs::meta {
namespace {

// Whether a read-only open of `inode` registers a hold: only files inside
// a checkpoint are removed whole while open.
bool Holdable(const InodeRecord& inode) {
  return inode.attr().type() == REGULAR && inode.in_checkpoint() != 0;
}

}  // namespace

absl::StatusOr<Namespace::ReadOpen> Namespace::OpenToRead(uint64_t ino, uint64_t reader_handle) {
  {
    // One read, no transaction, for the files outside checkpoints.
    MetaTxn txn(kv_);
    absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
    if (!inode.ok()) return inode.status();
    if (reader_handle == 0 || !Holdable(*inode)) return ReadOpen{inode->attr(), false};
  }
  return RunTxn<ReadOpen>(kv_, "open to read", [&](MetaTxn& txn) -> absl::StatusOr<ReadOpen> {
    // The inode is compared: a removal committing meanwhile (nlink 0, the
    // orphan record made) sends this open round again, to the branch below.
    absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
    if (!inode.ok()) return inode.status();
    if (!Holdable(*inode)) return ReadOpen{inode->attr(), false};
    const int64_t now_ms = clock_->NowMs();
    if (inode->attr().nlink() == 0) {
      absl::StatusOr<std::optional<OrphanRecord>> orphan =
          txn.GetRecord<OrphanRecord>(OrphanKey(ino));
      if (!orphan.ok()) return orphan.status();
      if (orphan->has_value()) {
        if ((*orphan)->reclaim_after_ms() <= now_ms) {
          return ErrnoStatus(ENOENT, absl::StrCat("open: inode ", ino,
                                                  " was removed and its chunks are being "
                                                  "reclaimed; open the file by name again"));
        }
        // Written back as it is: a claim of the orphan (DueOrphans) that read
        // it before this commits conflicts, and looks for holds again.
        txn.Put(OrphanKey(ino), **orphan);
      }
    }
    txn.PutRaw(ReaderHoldKey(ino, reader_handle), EncodeU64(static_cast<uint64_t>(now_ms)));
    return ReadOpen{inode->attr(), true};
  });
}

absl::Status Namespace::ReleaseReader(uint64_t ino, uint64_t reader_handle) {
  if (reader_handle == 0) return absl::OkStatus();
  return RunTxn(kv_, "release reader", [&](MetaTxn& txn) -> absl::Status {
    txn.Delete(ReaderHoldKey(ino, reader_handle));
    return absl::OkStatus();
  });
}

}  // namespace ckptfs::meta
