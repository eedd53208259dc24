// Committer: ends a checkpoint whose ranks have all arrived — verifies its
// files, makes them durable on the storage servers, and commits, or aborts.
//
//   1. CheckpointStore::PrepareCommit: a file still open for writing aborts
//      with EBUSY, a damaged one with EIO; else the storage servers holding
//      chunks of the subtree are known.
//   2. SyncStorageServers: one SYNC(whole_store) per server, in parallel,
//      naming the server's incarnations that acknowledged unsynced writes
//      of the files; a failure (a server down, or restarted since: those
//      writes may be lost) aborts with EIO, the reason naming the server.
//   3. CheckpointStore::FinishCommit: one durable transaction (COMMITTED,
//      files, bytes, the run directory's `latest`), provided nothing read in
//      step 1 changed; otherwise back to step 1 (a file written after the
//      sync would not be durable), a bounded number of times.
//
// Thread-safety: Run may be called from any thread; it blocks for the whole
// commit (storage syncs included), so the coordinator runs it on its own
// worker thread, never a gRPC thread. Store and Membership are borrowed.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_COMMITTER_H_
#define CKPTFS_SERVER_META_CHECKPOINT_COMMITTER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/meta.pb.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/membership.h"

namespace ckptfs::meta {

class Committer {
 public:
  struct Options {
    // Bounds the connect to each storage server and its syncfs.
    absl::Duration sync_timeout = absl::Seconds(120);
    // Prepare-sync-finish rounds before a checkpoint that keeps changing
    // under the commit aborts (EBUSY).
    int max_rounds = 5;
  };

  Committer(CheckpointStore* store, Membership* membership, const Options& options)
      : store_(store), membership_(membership), options_(options) {}
  // Virtual so that a test can wrap Run (e.g. hold a commit back, as a slow
  // SYNC would).
  virtual ~Committer() = default;

  // Ends checkpoint `ino` and returns its final info: COMMITTED, or ABORTED
  // with abort_errno EBUSY or EIO, with `applied` set when this call's
  // transaction ended it. A checkpoint that already ended (e.g. another
  // metadata server on the same store won the race) is returned as it is,
  // applied false. An error means the metadata store failed; the
  // checkpoint may still be PENDING.
  virtual absl::StatusOr<CheckpointStore::Ended> Run(uint64_t ino);

 private:
  CheckpointStore* const store_;
  Membership* const membership_;
  const Options options_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_COMMITTER_H_
