// FakeChunkTransport: storage servers in memory, for unit tests of the
// client and of anything built on it (fuse/ may use it too).
//
// Chunks are kept per (server id, inode, chunk index) with the semantics of
// the real storage server: WRITE replace / merge (a caller's CRC32C that
// does not match the payload fails with EBADMSG), a fill (replace only if
// absent, else EEXIST), READ of a missing chunk
// fails with ENOENT, a short chunk reads short, TRIM deletes and cuts, SYNC
// makes the inode's chunks on the server durable (and counts). Tests can
// make writes fail, slow every request down (to make requests overlap),
// corrupt a stored chunk, take a server down, make a server lose power
// (what no SYNC made durable is lost), delete one chunk, and count requests, including the
// most chunk writes ever in flight at once.
//
// Thread-safety: thread-safe.
#ifndef CKPTFS_CLIENT_TESTING_FAKE_CHUNK_TRANSPORT_H_
#define CKPTFS_CLIENT_TESTING_FAKE_CHUNK_TRANSPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/chunk_transport.h"

namespace ckptfs::client::testing {

class FakeChunkTransport : public ChunkTransport {
 public:
  FakeChunkTransport() = default;

  using ChunkTransport::WriteChunk;
  absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, uint32_t offset,
                          const void* data, size_t length, bool replace,
                          std::optional<uint32_t> crc32c) override;
  absl::Status FillChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, const void* data,
                         size_t length) override;
  absl::StatusOr<size_t> ReadChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                   uint32_t offset, void* buf, size_t length) override;
  absl::Status TrimChunks(uint32_t server_id, uint64_t ino, uint64_t trim_size,
                          uint32_t chunk_size) override;
  absl::Status SyncChunks(uint32_t server_id, uint64_t ino) override;

  // --- Fault injection ----------------------------------------------------
  // Every WRITE after the next `after` ones fails with `err` (0: none fail).
  void FailWrites(int err, int after = 0);
  // Every READ / TRIM / SYNC fails with `err` (0: none fail).
  void FailReads(int err);
  void FailTrims(int err);
  void FailSyncs(int err);
  // Each request sleeps this long before it is served.
  void SetDelay(absl::Duration delay);
  // The stored copy of a chunk fails its CRC32C: READs of it fail with EIO
  // (as the real server's check does) until a replace WRITE stores it anew.
  // REQUIRES: the chunk exists.
  void CorruptChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index);
  // A server that is down: every request to it fails with ECONNREFUSED
  // (nothing changes) until it is up again.
  void SetServerDown(uint32_t server_id, bool down);
  // A power loss on `server_id`: each of its chunks goes back to what the
  // last SYNC of its inode there saw, or away when none saw it.
  void LosePower(uint32_t server_id);
  // The chunk is gone from `server_id` (a lost chunk file): READs of it
  // fail with ENOENT. Returns whether it was there.
  bool DeleteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index);

  // --- Inspection ---------------------------------------------------------
  struct Counts {
    int writes = 0;
    int replace_writes = 0;
    int writes_with_crc = 0;  // WRITEs whose caller passed the CRC32C
    int fills = 0;            // FillChunk calls (each stored one is also a replace WRITE)
    int reads = 0;
    int trims = 0;
    int syncs = 0;
    int max_inflight_writes = 0;  // most WRITEs being served at one time
  };
  Counts counts() const;
  // READs of one chunk so far.
  int ReadsOf(uint64_t ino, uint64_t chunk_index) const;
  // The bytes stored for a chunk, or nullopt when it has none.
  std::optional<std::string> ChunkBytes(uint32_t server_id, uint64_t ino,
                                        uint64_t chunk_index) const;
  // Number of chunks stored for an inode, on all servers.
  int ChunkCount(uint64_t ino) const;
  // SYNCs received by `server_id` for `ino`.
  int SyncsOf(uint32_t server_id, uint64_t ino) const;
  // The bytes of a chunk as its last SYNC made them durable, or nullopt
  // when none did (what LosePower would leave).
  std::optional<std::string> DurableChunkBytes(uint32_t server_id, uint64_t ino,
                                               uint64_t chunk_index) const;

 private:
  using Key = std::tuple<uint32_t, uint64_t, uint64_t>;  // server, ino, chunk

  void Delay() const;
  // ECONNREFUSED when SetServerDown made `server_id` down.
  absl::Status DownStatus(uint32_t server_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<Key, std::string> chunks_ ABSL_GUARDED_BY(mu_);
  // What SYNCs made durable (LosePower).
  std::map<Key, std::string> durable_ ABSL_GUARDED_BY(mu_);
  std::set<Key> corrupt_ ABSL_GUARDED_BY(mu_);
  std::set<uint32_t> down_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<uint64_t, uint64_t>, int> reads_of_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<uint32_t, uint64_t>, int> syncs_of_ ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
  int inflight_writes_ ABSL_GUARDED_BY(mu_) = 0;
  int write_err_ ABSL_GUARDED_BY(mu_) = 0;
  int writes_before_failing_ ABSL_GUARDED_BY(mu_) = 0;
  int read_err_ ABSL_GUARDED_BY(mu_) = 0;
  int trim_err_ ABSL_GUARDED_BY(mu_) = 0;
  int sync_err_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
};

}  // namespace ckptfs::client::testing

#endif  // CKPTFS_CLIENT_TESTING_FAKE_CHUNK_TRANSPORT_H_
