// The checkpoint side of unlink and rmdir. Removing names is the one change
// an ended checkpoint takes: training frameworks delete their old
// checkpoints themselves (shutil.rmtree), so a COMMITTED checkpoint lets
// the names inside it go, and the first removal ends its validity in the
// same transaction — it becomes REMOVING (never committed again, hidden
// from listings like an aborted one) and the run directory's `latest`
// moves to the newest other committed checkpoint, or goes. An ABORTED or
// REMOVING checkpoint lets names go as it is; inside a PENDING one names
// come and go as anywhere else, but its directory is not rmdir'ed (EBUSY):
// a barrier may be running. Everything else stays EROFS (mutation_guard.h).
//
// Removed files follow the usual rules (ops_util.h, ReleaseInode): an
// orphan that open handles still read until the orphan grace has passed.
//
// Thread-safety: functions on a caller-owned MetaTxn.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_NAME_REMOVAL_H_
#define CKPTFS_SERVER_META_CHECKPOINT_NAME_REMOVAL_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/meta_store.pb.h"
#include "server/meta/inode_allocator.h"
#include "server/meta/meta_txn.h"

namespace ckptfs::meta {

// Stages what removing an entry of directory `dir` does to the checkpoint
// governing it: a COMMITTED one becomes REMOVING (removing_ms = now) and
// `latest` moves off it; nothing otherwise. `dir` was read through `txn`;
// when it is the checkpoint directory itself its state changes in `dir`,
// so the caller must stage `dir` (PutInode) after this returns, as it does
// for the entry it removes. `new_ino` as for PointLatestAt (latest.h):
// kept across retries of the transaction.
absl::Status BeforeNameRemoval(MetaTxn& txn, InodeAllocator& inodes,
                               std::optional<uint64_t>& new_ino, InodeRecord& dir, int64_t now_ns);

// Stages what rmdir of checkpoint directory `ckpt`, entry `name` of
// `run_dir`, does besides removing it: if `latest` names it, it moves to the
// newest other committed checkpoint (or goes). EBUSY while `ckpt` is
// PENDING. Both were read through `txn`; the caller stages `run_dir`
// afterwards, and checks that `ckpt` is empty (ENOTEMPTY).
absl::Status BeforeCheckpointDirRemoval(MetaTxn& txn, InodeAllocator& inodes,
                                        std::optional<uint64_t>& new_ino, const InodeRecord& ckpt,
                                        InodeRecord& run_dir, absl::string_view name,
                                        int64_t now_ns);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_NAME_REMOVAL_H_
