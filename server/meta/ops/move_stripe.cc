// Namespace::MoveStripeServer: the repairer's move of a file's copies off a
// storage server (`ckptfs repair`, after it copied the chunks onto the new
// one). One transaction on the file's inode; an orphan's reclamation record
// moves with it, so the reclaimer trims the copies where they now are.
//
// Unlike the other mutating operations, the move is allowed inside an ended
// checkpoint: it changes where the bytes live, not the bytes, and the files
// of committed checkpoints are exactly the ones whose copies must be kept.
#include <algorithm>
#include <cerrno>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errno_status.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"

namespace ckptfs::meta {
namespace {

bool StripeHolds(const Layout& layout, uint32_t server_id) {
  return std::find(layout.stripe().begin(), layout.stripe().end(), server_id) !=
         layout.stripe().end();
}

void ReplaceInStripe(Layout& layout, uint32_t from, uint32_t to) {
  for (uint32_t& id : *layout.mutable_stripe()) {
    if (id == from) id = to;
  }
}

}  // namespace

absl::StatusOr<Attr> Namespace::MoveStripeServer(uint64_t ino, uint32_t from, uint32_t to) {
  const std::string what =
      absl::StrCat("move the copies of inode ", ino, " from storage server ", from, " to ", to);
  if (from == to) {
    return ErrnoStatus(EINVAL, absl::StrCat(what, ": the two servers are the same"));
  }
  // Read outside the transaction, as NewLayout does: registrations are never
  // removed, so a registered server stays registered, and a heartbeat landing
  // meanwhile must not abort the move.
  absl::StatusOr<std::optional<ServerInfo>> target = membership_->GetServer(to);
  if (!target.ok()) return target.status();
  if (!target->has_value()) {
    return ErrnoStatus(EINVAL, absl::StrCat(what, ": no storage server ", to,
                                            " is registered (see `ckptfs status`)"));
  }
  return RunTxn<Attr>(kv_, "move stripe server", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
    if (!inode.ok()) return inode.status();
    switch (inode->attr().type()) {
      case REGULAR:
        break;
      case DIRECTORY:
        return ErrnoStatus(EISDIR, absl::StrCat(what, ": it is a directory"));
      default:
        return ErrnoStatus(EINVAL, absl::StrCat(what, ": it is not a regular file"));
    }
    Layout* layout = inode->mutable_attr()->mutable_layout();
    if (!StripeHolds(*layout, from)) {
      return ErrnoStatus(ESTALE,
                         absl::StrCat(what, ": its stripe [", absl::StrJoin(layout->stripe(), ","),
                                      "] no longer holds server ", from));
    }
    if (StripeHolds(*layout, to)) {
      // Two copies of a chunk must be on two servers.
      return ErrnoStatus(EINVAL, absl::StrCat(what, ": server ", to, " is already in its stripe [",
                                              absl::StrJoin(layout->stripe(), ","), "]"));
    }
    ReplaceInStripe(*layout, from, to);
    inode->mutable_attr()->set_ctime_ns(clock_->NowNs());
    txn.PutInode(*inode);
    if (inode->attr().nlink() == 0) {
      // An orphan: the reclaimer trims the servers its record names.
      absl::StatusOr<std::optional<OrphanRecord>> orphan =
          txn.GetRecord<OrphanRecord>(OrphanKey(ino));
      if (!orphan.ok()) return orphan.status();
      if (orphan->has_value()) {
        ReplaceInStripe(*(*orphan)->mutable_layout(), from, to);
        txn.Put(OrphanKey(ino), **orphan);
      }
    }
    return inode->attr();
  });
}

}  // namespace ckptfs::meta
