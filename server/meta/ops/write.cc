// Namespace::Open and CommitWrite: the metadata side of a file's data —
// O_TRUNC at open, writer registration, the close-to-open publication of a
// writer's size, the storage-server incarnations holding its unsynced
// writes (which a checkpoint commit's syncs must find still running), and
// the chunks its writes reached (InodeRecord.written: O_TRUNC empties it, a
// commit adds to it, common/written_chunks.h).
#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/written_chunks.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

absl::Status RequireRegular(const InodeRecord& inode, absl::string_view op) {
  switch (inode.attr().type()) {
    case REGULAR:
      return absl::OkStatus();
    case DIRECTORY:
      return ErrnoStatus(EISDIR,
                         absl::StrCat(op, ": inode ", inode.attr().ino(), " is a directory"));
    default:
      return ErrnoStatus(
          EINVAL, absl::StrCat(op, ": inode ", inode.attr().ino(), " is not a regular file"));
  }
}

// Adds the storage-server incarnations `request` reports holding unsynced
// writes to those the file keeps, each pair once. Returns whether any was new.
bool KeepUnsynced(InodeRecord& inode, const CommitWriteRequest& request) {
  bool added = false;
  for (const StorageIncarnation& reported : request.unsynced()) {
    const bool known = std::any_of(inode.unsynced().begin(), inode.unsynced().end(),
                                   [&](const StorageIncarnation& kept) {
                                     return kept.server_id() == reported.server_id() &&
                                            kept.incarnation() == reported.incarnation();
                                   });
    if (known) continue;
    *inode.add_unsynced() = reported;
    added = true;
  }
  return added;
}

// Drops from the file's unsynced incarnations those an fsync confirmed
// (request.synced). Returns whether any went.
bool ForgetSynced(InodeRecord& inode, const CommitWriteRequest& request) {
  if (request.synced().empty()) return false;
  auto* kept = inode.mutable_unsynced();
  const int before = kept->size();
  kept->erase(std::remove_if(kept->begin(), kept->end(),
                             [&](const StorageIncarnation& one) {
                               return std::any_of(request.synced().begin(), request.synced().end(),
                                                  [&](const StorageIncarnation& synced) {
                                                    return synced.server_id() == one.server_id() &&
                                                           synced.incarnation() ==
                                                               one.incarnation();
                                                  });
                             }),
              kept->end());
  return kept->size() != before;
}

}  // namespace

absl::StatusOr<Attr> Namespace::Open(uint64_t ino, bool truncate) {
  OpenRequest request;
  request.set_ino(ino);
  request.set_truncate(truncate);
  return Open(request);
}

absl::StatusOr<Attr> Namespace::Open(const OpenRequest& request) {
  if (!request.truncate() && request.writer_handle() == 0) return GetAttr(request.ino());
  const uint64_t ino = request.ino();
  return RunTxn<Attr>(kv_, "open", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
    if (!inode.ok()) return inode.status();
    if (absl::Status regular =
            RequireRegular(*inode, request.truncate() ? "open O_TRUNC" : "open for writing");
        !regular.ok()) {
      return regular;
    }
    if (absl::Status writable = RequireMutable(txn, *inode, "open for writing"); !writable.ok()) {
      return writable;
    }
    bool changed = AddWriter(*inode, request.writer_handle());
    if (request.truncate()) {
      const int64_t now = clock_->NowNs();
      inode->mutable_attr()->set_size(0);
      inode->mutable_attr()->set_mtime_ns(now);
      inode->mutable_attr()->set_ctime_ns(NextCtime(inode->attr(), now));
      inode->set_damaged(false);
      inode->clear_unsynced();
      ResetWritten(*inode->mutable_written());
      changed = true;
    }
    if (changed) txn.PutInode(*inode);
    return inode->attr();
  });
}

absl::StatusOr<Attr> Namespace::CommitWrite(uint64_t ino, uint64_t size, int64_t mtime_ns,
                                            bool durable) {
  CommitWriteRequest request;
  request.set_ino(ino);
  request.set_size(size);
  request.set_mtime_ns(mtime_ns);
  request.set_durable(durable);
  return CommitWrite(request);
}

absl::StatusOr<Attr> Namespace::CommitWrite(const CommitWriteRequest& request) {
  return RunTxn<Attr>(kv_, "commit write", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    if (request.durable()) txn.RequireDurable();
    absl::StatusOr<InodeRecord> inode = txn.GetInode(request.ino());
    if (!inode.ok()) return inode.status();
    if (absl::Status regular = RequireRegular(*inode, "commit write"); !regular.ok()) {
      return regular;
    }
    Attr* attr = inode->mutable_attr();
    const bool grows = request.size() > attr->size();
    if (grows || request.failed()) {
      if (absl::Status writable = RequireMutable(txn, *inode, "commit write"); !writable.ok()) {
        return writable;
      }
    } else {
      absl::StatusOr<CheckpointState> state = GoverningState(txn, *inode);
      if (!state.ok()) return state.status();
      if (IsEnded(*state)) {
        // Only an aborted checkpoint gets here with writes: a commit aborts
        // while a file is still open for writing, and no file of a
        // committed one opens for writing. Its size and mtime stay final,
        // but the writes in place did reach the chunks, so ctime moves as
        // for any change of content (the abort orphaned the file, so this
        // concerns only handles still open on it). A release without writes
        // changes nothing.
        bool changed = RemoveWriter(*inode, request.release_writer());
        if (request.size() != 0 || request.mtime_ns() != 0) {
          attr->set_ctime_ns(NextCtime(*attr, clock_->NowNs()));
          changed = true;
        }
        if (changed) txn.PutInode(*inode);
        return *attr;
      }
    }
    const bool removed = RemoveWriter(*inode, request.release_writer());
    const bool forgot = ForgetSynced(*inode, request);
    const bool kept = KeepUnsynced(*inode, request) || forgot;
    // A handle that wrote nothing releases with size 0 and mtime 0: only its
    // registration goes; the file's times stay (close without writes is not
    // a modification).
    if (request.size() == 0 && request.mtime_ns() == 0 && !request.failed()) {
      if (removed || kept) txn.PutInode(*inode);
      return *attr;
    }
    if (request.failed()) inode->set_damaged(true);
    const int64_t now = clock_->NowNs();
    attr->set_size(std::max(attr->size(), request.size()));
    MergeWritten(*inode->mutable_written(), request.written(), request.written_untracked(),
                 ChunksCovering(attr->size(), attr->layout().chunk_size()));
    attr->set_mtime_ns(request.mtime_ns() != 0 ? request.mtime_ns() : now);
    attr->set_ctime_ns(NextCtime(*attr, now));
    txn.PutInode(*inode);
    return *attr;
  });
}

}  // namespace ckptfs::meta
