// UnsyncedWrites: per file and storage server, which incarnations of the
// server (proto/data.proto, ResponseHeader.incarnation: a random number per
// run of the server) acknowledged writes of the file that no SYNC has
// confirmed yet.
//
// Why: a server holds an acknowledged write in its page cache until a sync.
// If it restarts meanwhile (its host rebooted, or a new empty server took
// its address and identity) those bytes may be gone, and a SYNC sent to
// the new run finds nothing to flush and succeeds. So the chunk transports
// record the incarnation of every WRITE and ADOPT reply here, and a SYNC of
// the file names them (written_by): the server refuses a sync of writes it
// did not take, so fsync fails instead of confirming lost bytes. The file's
// size commit at close hands the same list to the metadata service
// (CommitWriteRequest.unsynced), whose checkpoint commit does the same.
//
// Entries of a file live while something holds the file (Hold, Release: an
// OpenFileState) or until a SYNC confirms them; one transport may record
// writes of files nobody holds (the repairer), which its syncs then clear.
//
// Thread-safety: thread-safe; one mutex, never held across a call out.
#ifndef CKPTFS_CLIENT_UNSYNCED_WRITES_H_
#define CKPTFS_CLIENT_UNSYNCED_WRITES_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

class UnsyncedWrites {
 public:
  UnsyncedWrites() = default;
  UnsyncedWrites(const UnsyncedWrites&) = delete;
  UnsyncedWrites& operator=(const UnsyncedWrites&) = delete;

  // A holder of file `ino` comes and goes: its entries stay while any
  // holder is left, and go with the last (the service keeps what the size
  // commits reported).
  void Hold(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);

  // Server `server_id`, run `incarnation`, acknowledged a write of `ino`.
  // Incarnation 0 (a server that does not say) is not recorded.
  void Stored(uint64_t ino, uint32_t server_id, uint64_t incarnation) ABSL_LOCKS_EXCLUDED(mu_);

  // What a SYNC of `ino` on `server_id` must confirm: the incarnations,
  // and how far the record went when it was taken.
  struct Pending {
    std::vector<uint64_t> incarnations;
    uint64_t as_of = 0;
  };
  Pending ForSync(uint64_t ino, uint32_t server_id) const ABSL_LOCKS_EXCLUDED(mu_);
  // That SYNC succeeded: what `pending` named is durable, except writes
  // recorded after it was taken.
  void Synced(uint64_t ino, uint32_t server_id, const Pending& pending) ABSL_LOCKS_EXCLUDED(mu_);

  // Every (server, incarnation) of `ino` not yet confirmed, for the
  // metadata service.
  std::vector<meta::StorageIncarnation> Of(uint64_t ino) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // incarnation -> the record's sequence number when it last wrote.
  using Incarnations = absl::flat_hash_map<uint64_t, uint64_t>;
  struct File {
    int holders = 0;
    absl::flat_hash_map<uint32_t, Incarnations> servers;
  };

  mutable absl::Mutex mu_;
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, File> files_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_UNSYNCED_WRITES_H_
