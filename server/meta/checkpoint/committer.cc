// See committer.h.
#include "server/meta/checkpoint/committer.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "server/meta/checkpoint/store_sync.h"

namespace ckptfs::meta {

absl::StatusOr<CheckpointStore::Ended> Committer::Run(uint64_t ino) {
  for (int round = 0; round < options_.max_rounds; ++round) {
    const absl::Time prepare_start = absl::Now();
    absl::StatusOr<CheckpointStore::Prepared> prepared = store_->PrepareCommit(ino);
    if (!prepared.ok()) return prepared.status();
    if (prepared->info.state() != PENDING) {
      return CheckpointStore::Ended{std::move(prepared->info), /*applied=*/false};
    }
    if (prepared->abort_errno != 0) {
      return store_->AbortIfPending(ino, prepared->abort_errno, prepared->abort_reason);
    }
    const absl::Time sync_start = absl::Now();
    if (absl::Status synced =
            SyncStorageServers(*membership_, prepared->servers, options_.sync_timeout);
        !synced.ok()) {
      CKPTFS_LOG(kWarning) << "checkpoint " << prepared->info.name() << " (inode " << ino
                           << ") aborts: " << synced.message();
      return store_->AbortIfPending(ino, EIO, synced.message());
    }
    const absl::Time finish_start = absl::Now();
    absl::StatusOr<CheckpointStore::Finished> finished = store_->FinishCommit(ino, *prepared);
    if (!finished.ok()) return finished.status();
    if (!finished->changed) {
      if (!finished->applied) {
        // Another metadata server on the same store ended it first: its
        // commit (or abort), not this server's, and that server logs it.
        CKPTFS_LOG(kInfo) << "checkpoint " << finished->info.name() << " (inode " << ino << ") was "
                          << (finished->info.state() == COMMITTED ? "committed" : "aborted")
                          << " by another server meanwhile";
      } else if (finished->info.state() == COMMITTED) {
        CKPTFS_LOG(kInfo) << "checkpoint " << finished->info.name() << " (inode " << ino
                          << ") committed: " << finished->info.ranks() << " ranks, "
                          << finished->info.files() << " files, " << finished->info.bytes()
                          << " bytes; verified in "
                          << absl::FormatDuration(sync_start - prepare_start) << ", synced "
                          << prepared->servers.size() << " storage servers in "
                          << absl::FormatDuration(finish_start - sync_start) << ", recorded in "
                          << absl::FormatDuration(absl::Now() - finish_start);
      }
      return CheckpointStore::Ended{std::move(finished->info), finished->applied};
    }
    CKPTFS_LOG(kInfo) << "checkpoint " << prepared->info.name() << " (inode " << ino
                      << ") changed while it was being committed; verifying it again";
  }
  return store_->AbortIfPending(
      ino, EBUSY,
      absl::StrCat("checkpoint kept changing while it was being committed (", options_.max_rounds,
                   " attempts)"));
}

}  // namespace ckptfs::meta
