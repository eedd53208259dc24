// The checkpoint side of every namespace operation: which checkpoint governs
// an inode, what a new inode inherits, and the immutability guard that every
// mutating operation calls before it changes anything.
//
// An inode is governed by the checkpoint directory whose subtree holds it
// (InodeRecord.in_checkpoint), or, for a checkpoint directory itself, by
// itself. Inside an ended checkpoint (COMMITTED, ABORTED or REMOVING)
// nothing changes any more: the guard answers EROFS. The one exception,
// removing names (unlink, rmdir), is name_removal.h's. The checkpoint
// directory is read through the caller's MetaTxn, so an operation racing
// with the commit, abort or removal transaction conflicts and, on its
// retry, sees the new state.
//
// Thread-safety: pure functions, or functions on a caller-owned MetaTxn.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_MUTATION_GUARD_H_
#define CKPTFS_SERVER_META_CHECKPOINT_MUTATION_GUARD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/meta_store.pb.h"
#include "server/meta/meta_txn.h"

namespace ckptfs::meta {

// Whether `inode` is a directory declared as a checkpoint (any state).
inline bool IsCheckpointDir(const InodeRecord& inode) {
  return inode.checkpoint().info().state() != CHECKPOINT_STATE_UNSPECIFIED;
}

// The checkpoint directory governing `inode`: itself if it is one, else its
// in_checkpoint (0: none). For a directory this is also what a new child of
// it inherits as in_checkpoint.
inline uint64_t CheckpointOf(const InodeRecord& inode) {
  return IsCheckpointDir(inode) ? inode.attr().ino() : inode.in_checkpoint();
}

// Whether a checkpoint in `state` has ended: it never becomes (or is again)
// PENDING, and nothing in it changes but the removal of names.
inline bool IsEnded(CheckpointState state) {
  return state == COMMITTED || state == ABORTED || state == REMOVING;
}

// How `state` reads in messages: "committed", "aborted", "being removed".
absl::string_view EndedStateText(CheckpointState state);

// The state of the checkpoint governing `inode` (UNSPECIFIED if none, or if
// its directory is gone), read through `txn`.
absl::StatusOr<CheckpointState> GoverningState(MetaTxn& txn, const InodeRecord& inode);

// EROFS ("<op>: inode N is inside committed checkpoint M") when `inode` is
// governed by an ended checkpoint (IsEnded); OK otherwise.
absl::Status RequireMutable(MetaTxn& txn, const InodeRecord& inode, absl::string_view op);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_MUTATION_GUARD_H_
