// Whole-subtree reads and removals inside one metadata transaction: what
// declaring, committing, aborting and removing a checkpoint need, and the
// read-ahead that lets a commit read thousands of files' inodes with scans.
//
// ReadSubtree reads every inode under a directory through the caller's
// MetaTxn, so each becomes a compare: a transaction built on it commits only
// if nothing in the subtree changed meanwhile (an entry added or removed
// changes its directory's inode; see meta_txn.h on scans).
//
// Thread-safety: functions on a caller-owned MetaTxn.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_SUBTREE_H_
#define CKPTFS_SERVER_META_CHECKPOINT_SUBTREE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/meta_store.pb.h"
#include "server/meta/kv_store.h"
#include "server/meta/meta_txn.h"

namespace ckptfs::meta {

struct SubtreeEntry {
  uint64_t parent = 0;
  std::string name;
  std::string path;  // relative to the subtree's root, "a/b/c"
  InodeRecord inode;
};

// Reads ahead, into `txn` (MetaTxn::ReadAhead), the inodes `inos` (any
// order) with scans of their inode-number range, if their numbers are dense
// enough (as a checkpoint's files created together are) for that to beat a
// lookup each; else nothing. The txn's later GetInode of one of them is
// answered from the scan, value and version, so its compare is what a
// separate lookup would have recorded.
absl::Status ReadInodesAhead(MetaTxn& txn, const std::vector<uint64_t>& inos);

// Every inode below directory `root` (not `root` itself), parents before
// their children. ELOOP beyond a depth of 4096. With `read_ahead`, each
// directory's inodes are read ahead (ReadInodesAhead).
absl::StatusOr<std::vector<SubtreeEntry>> ReadSubtree(MetaTxn& txn, uint64_t root,
                                                      bool read_ahead = false);

// As ReadSubtree, but hands each entry to `visit` in turn instead of
// keeping them all (a checkpoint's thousands of inodes need not be held at
// once). The entry is reused for the next one: `visit` may move from it. A
// visit's error ends the walk and is returned.
absl::Status VisitSubtree(MetaTxn& txn, uint64_t root, bool read_ahead,
                          absl::FunctionRef<absl::Status(SubtreeEntry&)> visit);

// The name under which directory `parent` holds inode `ino` (a scan of the
// parent's entries); ENOENT if it holds none.
absl::StatusOr<std::string> NameInParent(MetaTxn& txn, uint64_t parent, uint64_t ino);

// Stages the removal of every entry of `entries` (a ReadSubtree result):
// dentries deleted; an inode with hard links outside the subtree loses the
// names it had inside and is kept; other directories, symlinks and special
// files deleted, regular files made orphans due for reclamation at `now_ms` + `grace_ms`, and
// before that as soon as no reader holds them (OrphanRecord.reclaim_when_unread: at once for a file
// nobody has open) — unless the file has a registered writer, whose writes still in flight would
// recreate chunks after an early trim. Returns the number of inodes deleted outright; the caller
// adds -that to the inode count once (AddInodeCount reads the shard once per transaction).
int64_t StageSubtreeRemoval(MetaTxn& txn, const std::vector<SubtreeEntry>& entries, int64_t now_ms,
                            int64_t grace_ms);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_SUBTREE_H_
