// WritebackTracker: which chunks of a ChunkStore are not yet known to be
// durable, and which of them a failed sync may have lost.
//
// Linux reports a write-back error (the disk refused dirty pages) to the
// first sync that looks, then marks those pages clean: they are never
// written, and a later fdatasync or syncfs through a descriptor opened
// afresh — as each of the store's syncs is — succeeds. So the store keeps
// the error itself. Every chunk published (written, filled, cut, adopted)
// since a sync last covered it is tracked here; when a sync fails, every
// chunk tracked then (and every write in flight then) is marked lost, and
// every later sync covering a lost chunk fails naming it, until the chunk
// is published again or removed. A restart forgets: it gives the server a
// new incarnation (chunk_store.h), which refuses syncs of the writes the
// old one acknowledged, and its scrubber rereads what is stored.
//
// Coverage: a sync covers the chunks published before it began (their
// renames were done, and their data written, before it started); one
// published while it runs stays tracked for the next.
//
// Memory: one entry per chunk published and not yet synced. Past
// kMaxTracked the tracker keeps no more entries, only that some chunks went
// untracked; a sync that fails then marks the whole store lost (every
// later sync fails until the server restarts), and a whole-store sync that
// succeeds ends the overflow.
//
// Thread-safety: thread-safe; one mutex, held only to update the maps.
#ifndef CKPTFS_SERVER_STORAGE_WRITEBACK_TRACKER_H_
#define CKPTFS_SERVER_STORAGE_WRITEBACK_TRACKER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/chunk_format.h"

namespace ckptfs::storage {

class WritebackTracker {
 public:
  // Chunks tracked one by one, at most (about 40 MiB of entries).
  static constexpr size_t kMaxTracked = size_t{1} << 20;

  // Tracks up to `max_tracked` chunks one by one (tests pass fewer).
  explicit WritebackTracker(size_t max_tracked = kMaxTracked) : max_tracked_(max_tracked) {}
  WritebackTracker(const WritebackTracker&) = delete;
  WritebackTracker& operator=(const WritebackTracker&) = delete;

  // Before a chunk file is written: a token for Published. A sync that
  // fails before the chunk is published counts it as lost.
  uint64_t Writing() ABSL_LOCKS_EXCLUDED(mu_);
  // Chunk `key` was replaced by a file whose writing began with `token`
  // (Writing); for a file written by someone else (Adopt), `written_at` is
  // when it was last modified, and a sync that failed since makes it lost
  // too. Replaces what was known of the old file: published anew, a chunk
  // that was lost no longer is.
  void Published(ChunkKey key, uint64_t token, std::optional<absl::Time> written_at = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Chunk `key` was removed (unlinked, set aside): nothing of it needs syncing.
  void Removed(ChunkKey key) ABSL_LOCKS_EXCLUDED(mu_);

  // Before a sync starts: what it will cover (everything published so far).
  uint64_t BeginSync() ABSL_LOCKS_EXCLUDED(mu_);
  // The sync of inode `ino` (every inode: nullopt) that BeginSync returned
  // `begun` for succeeded: the chunks published before it, and not lost,
  // are durable.
  void Synced(std::optional<uint64_t> ino, uint64_t begun) ABSL_LOCKS_EXCLUDED(mu_);
  // A sync failed with `error`: if it is one that write-back gives (EIO,
  // ENOSPC, EDQUOT, EROFS, EUCLEAN), every chunk not known to be durable,
  // and every chunk being written, may have lost its pages. Any other error
  // (a directory that cannot be listed, out of descriptors: the sync did
  // not get to run) changes nothing.
  void Failed(const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);
  // OK, or EIO naming a lost chunk of inode `ino` (of any inode: nullopt),
  // the sync error that lost it, and what to do.
  absl::Status CheckNoneLost(std::optional<uint64_t> ino) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    uint64_t published = 0;  // sequence number at Published
    bool lost = false;
  };
  using InodeChunks = absl::flat_hash_map<uint32_t, Entry>;

  void EraseLocked(uint64_t ino, InodeChunks& chunks, InodeChunks::iterator at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LostError(ChunkKey key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_tracked_;
  mutable absl::Mutex mu_;
  // Tokens and publications share one sequence.
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, InodeChunks> chunks_ ABSL_GUARDED_BY(mu_);
  size_t tracked_ ABSL_GUARDED_BY(mu_) = 0;
  size_t lost_ ABSL_GUARDED_BY(mu_) = 0;
  // The sequence and time of the last failed sync (0 / InfinitePast: none),
  // and its error's message.
  uint64_t failed_at_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time failed_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string failure_ ABSL_GUARDED_BY(mu_);
  // The last chunk published past max_tracked_ (0: none untracked now).
  uint64_t untracked_until_ ABSL_GUARDED_BY(mu_) = 0;
  // A sync failed while chunks were untracked: nothing can be confirmed.
  bool all_lost_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_WRITEBACK_TRACKER_H_
