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

// A view of a KvStore for a MetaTxn that reads a large subtree: the inodes
// of a directory's entries are read with one range scan of their inode keys
// (when their numbers are dense, as a checkpoint's files created together
// are) instead of a lookup each; the txn's Gets of them are answered from
// what the scan read, value and version, so their compares are what
// separate Gets would have recorded (the KV commit checks them the same
// way). Every other call goes to the store beneath.
//
// Thread-safety: as its MetaTxn's (one thread). The store is borrowed.
class SubtreeReadAhead : public KvStore {
 public:
  explicit SubtreeReadAhead(KvStore* kv) : kv_(kv) {}

  // Reads ahead the inodes `inos` (any order) if their numbers are dense
  // enough for a scan of their range to beat a lookup each; else nothing.
  absl::Status ReadInodes(const std::vector<uint64_t>& inos);

  absl::StatusOr<std::optional<VersionedValue>> Get(absl::string_view key) override;
  absl::StatusOr<std::vector<KeyValue>> Scan(absl::string_view prefix,
                                             absl::string_view start_after,
                                             size_t limit) override {
    return kv_->Scan(prefix, start_after, limit);
  }
  absl::StatusOr<int64_t> Commit(const Txn& txn) override { return kv_->Commit(txn); }

 private:
  KvStore* const kv_;
  // What each scan read, in key order; a Get takes its entry (version 0).
  std::vector<std::vector<KeyValue>> ahead_;
};

// Every inode below directory `root` (not `root` itself), parents before
// their children. ELOOP beyond a depth of 4096. With `read_ahead` (the store
// `txn` reads through), each directory's inodes are read ahead by it.
absl::StatusOr<std::vector<SubtreeEntry>> ReadSubtree(MetaTxn& txn, uint64_t root,
                                                      SubtreeReadAhead* read_ahead = nullptr);

// The name under which directory `parent` holds inode `ino` (a scan of the
// parent's entries); ENOENT if it holds none.
absl::StatusOr<std::string> NameInParent(MetaTxn& txn, uint64_t parent, uint64_t ino);

// Stages the removal of every entry of `entries` (a ReadSubtree result):
// dentries deleted, regular files made orphans whose chunks are due for
// reclamation at once (`now_ms`) — or after `busy_grace_ms` for a file with a
// registered writer, whose writes still in flight would recreate chunks after
// an immediate trim — directories and symlinks deleted. Returns
// the number of inodes deleted outright; the caller adds -that to the inode
// count once (AddInodeCount reads the shard once per transaction).
int64_t StageSubtreeRemoval(MetaTxn& txn, const std::vector<SubtreeEntry>& entries,
                            int64_t now_ms, int64_t busy_grace_ms);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_SUBTREE_H_
