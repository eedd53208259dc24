// See guard.h.
#include "server/meta/checkpoint/guard.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/keys.h"

namespace ckptfs::meta {

absl::StatusOr<CheckpointState> GoverningState(MetaTxn& txn, const InodeRecord& inode) {
  if (IsCheckpointDir(inode)) return inode.checkpoint().info().state();
  if (inode.in_checkpoint() == 0) return CHECKPOINT_STATE_UNSPECIFIED;
  absl::StatusOr<std::optional<InodeRecord>> dir =
      txn.GetRecord<InodeRecord>(InodeKey(inode.in_checkpoint()));
  if (!dir.ok()) return dir.status();
  if (!dir->has_value()) return CHECKPOINT_STATE_UNSPECIFIED;
  return (*dir)->checkpoint().info().state();
}

absl::Status RequireMutable(MetaTxn& txn, const InodeRecord& inode, absl::string_view op) {
  absl::StatusOr<CheckpointState> state = GoverningState(txn, inode);
  if (!state.ok()) return state.status();
  if (!IsEnded(*state)) return absl::OkStatus();
  return ErrnoStatus(EROFS, absl::StrCat(op, ": inode ", inode.attr().ino(), " is inside ",
                                         *state == COMMITTED ? "committed" : "aborted",
                                         " checkpoint ", CheckpointOf(inode),
                                         ", which can no longer change"));
}

}  // namespace ckptfs::meta
