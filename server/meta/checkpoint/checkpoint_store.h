// CheckpointStore: the checkpoint transactions (docs/checkpoints.md)
// as operations on the KvStore — declare, record an arrival,
// describe, commit, abort, remove and retention. No threads and no waiting: the
// barrier, its timers and the commit worker live in coordinator.h; SYNC of the
// storage servers in committer.h.
//
// State lives in the checkpoint directory's InodeRecord.checkpoint; each
// rank's arrival in a/<ckpt><rank>; a PENDING checkpoint also has k/<ckpt>
// so a restarted service finds it (server/meta/keys.h). Every inode of a
// declared subtree carries in_checkpoint = the checkpoint directory.
//
// Committing is two steps so that the storage servers are synced outside any
// transaction: PrepareCommit reads the subtree (verifying that no file is
// open for writing or damaged, and collecting the servers holding chunks),
// the caller syncs those servers, and FinishCommit commits only if nothing
// PrepareCommit read has changed since (else the caller prepares again).
//
// Thread-safety: thread-safe; every method is one or more KV transactions.
// KvStore, InodeAllocator and Clock are borrowed.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_CHECKPOINT_STORE_H_
#define CKPTFS_SERVER_META_CHECKPOINT_CHECKPOINT_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/meta.pb.h"
#include "proto/meta_store.pb.h"
#include "server/meta/checkpoint/subtree.h"
#include "server/meta/clock.h"
#include "server/meta/inode_allocator.h"
#include "server/meta/kv_store.h"
#include "server/meta/meta_txn.h"

namespace ckptfs::meta {

class CheckpointStore {
 public:
  struct Options {
    // The barrier timeout when neither the request nor the directory or its
    // parent (user.ckptfs.commit_timeout_s) says.
    uint32_t default_timeout_s = 600;
    // How long the chunks of a removed checkpoint's file are kept at most:
    // while a reader holds it open (ops/reader_hold.cc), or the whole time if
    // it still has a registered writer (its writes in flight would otherwise
    // recreate chunks after the trim, which nothing would ever reclaim).
    absl::Duration busy_file_grace = absl::Hours(1);
    // How long retention leaves a REMOVING checkpoint to whoever is removing
    // its names (shutil.rmtree fails when names vanish under it), counted
    // from its first removal.
    absl::Duration removing_grace = absl::Minutes(1);
  };

  CheckpointStore(KvStore* kv, InodeAllocator* inodes, Clock* clock, const Options& options)
      : kv_(kv), inodes_(inodes), clock_(clock), options_(options) {}
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  // --- declare.cc ---
  // Declares directory request.ino a PENDING checkpoint of request.ranks
  // ranks and marks its subtree. EINVAL: ranks outside 1..kMaxCheckpointRanks,
  // the root, a directory inside a checkpoint or holding one, or one already
  // declared with another N (same N: harmless, any state; returns it as is).
  // ENOTDIR / ENOENT as usual.
  absl::StatusOr<CheckpointInfo> Declare(const DeclareCheckpointRequest& request);

  // Records rank `rank`'s arrival (idempotent); the first arrival sets
  // first_commit_ms, from which the barrier's timeout counts. Returns the
  // checkpoint as it now is (arrived not filled in); a COMMITTED or ABORTED
  // one is returned unchanged. EINVAL: not a checkpoint, or rank >= ranks.
  absl::StatusOr<CheckpointInfo> Arrive(uint64_t ino, uint32_t rank);

  // --- describe.cc ---
  // The checkpoint `ino`, arrived filled in (the stored arrivals, counted:
  // one inode read and one count, which is also how a barrier learns what
  // other metadata servers recorded). EINVAL if `ino` is a directory but not
  // a checkpoint, ENOTDIR if not a directory.
  absl::StatusOr<CheckpointInfo> Get(uint64_t ino);
  // The directory holding checkpoint directory `ino` (its run directory).
  absl::StatusOr<uint64_t> RunDirOf(uint64_t ino);
  // The checkpoints that are children of `run_dir`, by name, and the newest
  // committed one's name.
  absl::StatusOr<ListCheckpointsReply> List(uint64_t run_dir);
  // The ranks that arrived at checkpoint `ino`, ascending.
  absl::StatusOr<std::vector<uint32_t>> Arrivals(uint64_t ino);
  // Every checkpoint the k/ index lists as PENDING.
  absl::StatusOr<std::vector<uint64_t>> Pending();
  // How Get counts a checkpoint's arrival records: `count` returns
  // how many keys start with the prefix it is given (e.g.
  // EtcdKvStore::CountPrefix, which sends no keys back). Unset: the records
  // are scanned. Set before the store is shared between threads.
  using KeyCounter = std::function<absl::StatusOr<uint64_t>(absl::string_view prefix)>;
  void set_arrival_counter(KeyCounter count) { count_keys_ = std::move(count); }
  // Deletes the arrival records of an ended or removed checkpoint.
  absl::Status DropArrivals(uint64_t ino);

  // --- commit.cc ---
  struct Prepared {
    CheckpointInfo info;  // as read; not PENDING: already ended, nothing to do
    // Nonzero: the checkpoint must abort with this errno and reason.
    int abort_errno = 0;
    std::string abort_reason;
    // Storage servers holding chunks of its files, each with its
    // incarnations that acknowledged writes of them not known to be synced
    // (InodeRecord.unsynced): the sync must find those still running.
    std::map<uint32_t, std::set<uint64_t>> servers;
    uint64_t files = 0;
    uint64_t bytes = 0;
    // The transaction that read the checkpoint (nothing staged): every key
    // read, with the version read, is FinishCommit's precondition — its
    // compares. FinishCommit stages the commit in it, so that they are
    // checked once, by the KV commit, instead of being read again first.
    std::unique_ptr<MetaTxn> txn;
  };
  absl::StatusOr<Prepared> PrepareCommit(uint64_t ino);

  struct Finished {
    bool changed = false;  // something changed since PrepareCommit: prepare again
    CheckpointInfo info;   // otherwise the checkpoint's state now
    // This call's transaction committed it (false: it had ended meanwhile,
    // e.g. another metadata server on the same store committed or aborted
    // it first).
    bool applied = false;
  };
  // Marks the checkpoint COMMITTED (durably, with ended_ms, files, bytes) and
  // points its parent's `latest` symlink at it, if nothing `prepared` read
  // has changed. A checkpoint that ended meanwhile is returned as it is.
  // First in prepared.txn (one KV commit, whose compares are the versions
  // read); on a conflict, in fresh transactions that read the versions
  // again to tell a change of the checkpoint from one elsewhere.
  absl::StatusOr<Finished> FinishCommit(uint64_t ino, Prepared& prepared);

  // Aborts PENDING checkpoint `ino`: ABORTED with `err` and `reason`; every
  // file of its subtree becomes an orphan due for reclamation now, its
  // subdirectories and symlinks go; the directory stays, empty. Returns the
  // checkpoint's info afterwards (unchanged if it was not PENDING).
  absl::StatusOr<CheckpointInfo> Abort(uint64_t ino, int err, absl::string_view reason);
  // How a checkpoint ended, and whether the call that returns it ended it.
  struct Ended {
    CheckpointInfo info;
    // This call's transaction committed or aborted it; false when it had
    // already ended (another metadata server on the same store may have
    // ended it first: only the one that applied counts it, logs it and
    // applies retention).
    bool applied = false;
  };
  // Abort, telling whether this call's transaction aborted it.
  absl::StatusOr<Ended> AbortIfPending(uint64_t ino, int err, absl::string_view reason);

  // --- remove.cc ---
  // Removes checkpoint `name` of `run_dir` (any state) with its whole
  // subtree (chunks due for reclamation now). `latest`, if it named it,
  // moves to the newest remaining committed checkpoint, or goes. Returns the
  // removed checkpoint's inode. EINVAL if `name` is not a checkpoint.
  // With `only`: removes the entry only while it is still that checkpoint
  // in that state (any state if CHECKPOINT_STATE_UNSPECIFIED; ESTALE
  // otherwise).
  struct RemoveOnly {
    uint64_t ino;
    CheckpointState state;
  };
  absl::StatusOr<uint64_t> Remove(uint64_t run_dir, absl::string_view name,
                                  const RemoveOnly* only = nullptr);

  // Retention of the run directory holding checkpoint `ckpt` (its
  // user.ckptfs.keep = K), among the checkpoints there that have `ckpt`'s
  // owner: removes every ABORTED one, every REMOVING one whose first
  // removal is options().removing_grace old, and the COMMITTED ones older
  // (by ended_ms) than the newest K. Returns the inodes removed; none
  // without a valid keep.
  absl::StatusOr<std::vector<uint64_t>> Retain(uint64_t ckpt);

  // The checkpoint governing file (or directory) `ino` if it is PENDING;
  // nullopt otherwise.
  absl::StatusOr<std::optional<uint64_t>> PendingCheckpointOf(uint64_t ino);

  const Options& options() const { return options_; }

 private:
  // Stages checkpoint `dir`'s commit in `txn` (as read through it, PENDING)
  // and sets `committed` to its info as committed.
  absl::Status StageCommit(MetaTxn& txn, InodeRecord& dir, const Prepared& prepared,
                           std::optional<uint64_t>& latest_ino, CheckpointInfo& committed);

  int64_t BusyGraceMs() const { return absl::ToInt64Milliseconds(options_.busy_file_grace); }

  // The stored arrivals of PENDING checkpoint `ino`, counted.
  absl::StatusOr<uint32_t> CountArrivals(uint64_t ino);

  KvStore* const kv_;
  KeyCounter count_keys_;
  InodeAllocator* const inodes_;
  Clock* const clock_;
  const Options options_;
};

// The status of a commit on an aborted checkpoint: its abort_errno (EIO if
// unset) with its abort_reason as the message.
absl::Status AbortedStatus(const CheckpointInfo& info);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_CHECKPOINT_STORE_H_
