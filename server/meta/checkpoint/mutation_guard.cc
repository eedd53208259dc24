// See mutation_guard.h.
#include "server/meta/checkpoint/mutation_guard.h"

#include <cerrno>
#include <string>

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

absl::string_view EndedStateText(CheckpointState state) {
  switch (state) {
    case COMMITTED:
      return "committed";
    case ABORTED:
      return "aborted";
    case REMOVING:
      return "being removed";
    default:
      return "pending";
  }
}

absl::Status RequireMutable(MetaTxn& txn, const InodeRecord& inode, absl::string_view op) {
  absl::StatusOr<CheckpointState> state = GoverningState(txn, inode);
  if (!state.ok()) return state.status();
  if (!IsEnded(*state)) return absl::OkStatus();
  const uint64_t ckpt = CheckpointOf(inode);
  const std::string where =
      *state == REMOVING ? absl::StrCat("checkpoint ", ckpt, ", which is being removed and")
                         : absl::StrCat(EndedStateText(*state), " checkpoint ", ckpt, ", which");
  return ErrnoStatus(EROFS, absl::StrCat(op, ": inode ", inode.attr().ino(), " is inside ", where,
                                         " can no longer change (unlink and rmdir "
                                         "are the only changes it takes)"));
}

}  // namespace ckptfs::meta
