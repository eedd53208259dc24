// The `latest` pointer of a run directory: a symlink naming its newest
// committed checkpoint, kept by the commit transaction, by checkpoint
// removal and by the first unlink or rmdir inside a committed checkpoint.
//
// Its name is the run directory's user.ckptfs.latest_name ("latest" when
// unset; "" for no pointer at all, for frameworks that keep their own file
// called `latest`, as DeepSpeed does). Only a symlink under that name is
// ever touched: a regular file or directory of the name is left alone (and
// logged); naming the pointer after one is refused (EEXIST).
//
// Thread-safety: functions on a caller-owned MetaTxn.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_LATEST_H_
#define CKPTFS_SERVER_META_CHECKPOINT_LATEST_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/meta_store.pb.h"
#include "server/meta/inode_allocator.h"
#include "server/meta/meta_txn.h"

namespace ckptfs::meta {

// The name of `run_dir`'s pointer: its user.ckptfs.latest_name, "latest"
// when unset; nullopt when it keeps none ("", or a stored value that does
// not parse).
std::optional<std::string> LatestPointerName(const InodeRecord& run_dir);

// Stages `run_dir`'s pointer -> `target` (nothing if it keeps none):
// creates the symlink (an inode number from `inodes`, allocated once into
// `new_ino` and kept across retries of the transaction), or replaces one
// with another target by a new inode under the same name (a symlink's
// target never changes: mounts cache it per inode). `run_dir` is the
// directory as read through `txn`; when its entry changes it is updated and
// staged, and `inode_delta` grows by the inodes added less those deleted.
absl::Status PointLatestAt(MetaTxn& txn, InodeAllocator& inodes, std::optional<uint64_t>& new_ino,
                           InodeRecord& run_dir, absl::string_view target, int64_t now_ns,
                           int64_t& inode_delta);

// Stages the removal of `run_dir`'s pointer, if it has one
// (`inode_delta` shrinks by one).
absl::Status RemoveLatest(MetaTxn& txn, InodeRecord& run_dir, int64_t now_ns, int64_t& inode_delta);

// The target of `run_dir`'s pointer; nullopt if it has none.
absl::StatusOr<std::optional<std::string>> LatestTarget(MetaTxn& txn, const InodeRecord& run_dir);

// The name of the newest COMMITTED checkpoint (by ended_ms) among
// `run_dir`'s children, `except` (an inode; 0: none) left out; nullopt if
// there is none. Reads through `txn`.
absl::StatusOr<std::optional<std::string>> NewestCommitted(MetaTxn& txn, uint64_t run_dir,
                                                           uint64_t except);

// Stages what checkpoint `ckpt`, named `name` in `run_dir`, ceasing to be
// valid (removed, or no longer committed) does to the pointer: if it names
// it, it moves to the newest other COMMITTED checkpoint, or goes when there
// is none. `run_dir`, `new_ino` and `inode_delta` as for PointLatestAt.
absl::Status MoveLatestOff(MetaTxn& txn, InodeAllocator& inodes, std::optional<uint64_t>& new_ino,
                           InodeRecord& run_dir, absl::string_view name, uint64_t ckpt,
                           int64_t now_ns, int64_t& inode_delta);

// Stages the pointer of `run_dir` changing its name from `from` to `to`
// (nullopt: no pointer), what setting or removing user.ckptfs.latest_name
// does: the symlink under `from` goes, and `to` names the newest committed
// checkpoint if there is one. EEXIST, with nothing staged, when `to` is an
// entry that is not a symlink (a symlink there is taken for the pointer).
// The caller then stores the new value in `run_dir` and stages it;
// `new_ino` and `inode_delta` as for PointLatestAt.
absl::Status RenameLatest(MetaTxn& txn, InodeAllocator& inodes, std::optional<uint64_t>& new_ino,
                          InodeRecord& run_dir, const std::optional<std::string>& from,
                          const std::optional<std::string>& to, int64_t now_ns,
                          int64_t& inode_delta);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_LATEST_H_
