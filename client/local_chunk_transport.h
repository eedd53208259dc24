// LocalChunkTransport: a ChunkTransport that reads and writes the chunks of
// storage servers running on this host through their chunk files, and
// hands everything else (merging writes, fills, trims, syncs, the chunks of
// other servers) to the transport it wraps. HDFS calls the read half a
// short-circuit local read.
//
// Why: on a node that runs both a mount and a storage server (`ckptfs up`,
// or a training node lending its flash to the cluster), a chunk over
// loopback TCP costs a send copy, a receive copy, a CRC pass on each side
// and two event loops, on cores the ranks need too.
//   - Reads in place: a chunk costs one O_DIRECT read of its whole file (as
//     the server reads it): a whole-chunk read into a ChunkBuffer (aligned,
//     on huge pages) takes the data straight from the disk with no copy,
//     any other read goes into a scratch buffer on huge pages and is copied
//     out. Less CPU per GiB loaded and faster loads than over loopback TCP,
//     provided the buffers are on huge pages: on 4 KiB pages the O_DIRECT
//     reads are split into small device requests (docs/tuning.md).
//   - Writes in place: a write from the start of a chunk from 4096-aligned
//     memory (a ChunkBuffer: what every write-behind flush sends; a whole
//     chunk, or the last one of a file) is
//     written by this process as a complete chunk file under the server's
//     tmp/ ("local.<process tag>.<n>"): the header block through the page
//     cache, the data with O_DIRECT straight from the buffer, a zero-padded
//     last block; and the
//     server is asked to ADOPT it (proto/data.proto): it checks the file's
//     size and header and renames it into place under the chunk's lock,
//     where its own write would have put the same bytes. It refuses
//     (EEXIST) when the chunk it holds is longer than the file — another
//     client wrote past this one's end, and a merge must keep those bytes —
//     and the write then goes over the network as before. The server never
//     touches the data; its durability (SYNC, a commit's syncfs) covers the
//     file like any other. Any failure on the way (the file system refuses,
//     the server says no, an older server does not know ADOPT) removes the
//     file and sends the chunk over the network as before (a refused file
//     that cannot be removed fails the write instead); a server that
//     answered EOPNOTSUPP is asked again only after Use::adopt_retry.
//     A mount that dies between writing a file and its ADOPT leaves the
//     file in tmp/: the server removes such files after an hour
//     (ChunkStore::SweepIfDue), and all of tmp/ at start. What a WRITE
//     over TCP has and this has not: the server's second CRC32C pass over
//     the received bytes. No network carries them here; the CRC32C comes
//     from the same memory that is written, and every read checks it.
// The mount turns both on by default (ckptfs-fuse --local_reads,
// --local_writes); a library Client only when ClientOptions asks, since
// library callers (tests, the bench's --native ranks) stand in for remote
// nodes.
//
// Which servers are local: ListServers names each server's data directory
// (ServerInfo.data_dir) and identity (uuid). A server counts as local when
// the metadata service calls it alive, this process can read
// <data_dir>/server.uuid holding that uuid (a directory of the same name
// that belongs to another server or cluster never matches), and the server
// holds its running-lock: an OFD read lock on <data_dir>/LOCK
// (server/storage/data_dir.h), which the kernel drops the moment the
// server's process dies, whatever pid namespace it lives in. Every read
// and write checks that lock again (one fcntl), so a dead server's files
// are never used in its place: its requests go to the network and fail
// over to another copy like everyone else's. The map is loaded at
// construction and again every `refresh` by a background thread, so no
// request waits for the metadata service.
//
// Why reading in place is safe: a server changes a chunk file only by the
// atomic rename (or unlink) of a complete file (server/storage/chunk_store.h),
// so an open file is one complete version, and each read checks what the
// server's read checks: the file's size, the header (magic, its own CRC,
// that it names this chunk) and the CRC32C of the whole chunk's data.
// Whatever is unusual — no such file (a hole, or a chunk the scrubber set
// aside), a check that fails, an I/O error — is not judged here: the read
// goes to the server through the wrapped transport, whose answer is the
// server's (ENOENT, or EIO once it has quarantined the chunk).
//
// What it does not do: a local read or write has no deadline (a local disk
// that hangs hangs the caller, as it hangs the server), and it skips the
// data path's credential: the chunk directories' own permissions decide,
// as for any local file (servers make them 0700, so a mount run neither as
// the server's user nor as root goes over TCP; files a mount writes are
// made 0644, like the server's own, whatever its umask).
//
// Metrics: ckptfs_client_local_chunk_reads_total{result="local"|"missing"|
// "rejected"}, ckptfs_client_local_chunk_read_bytes_total,
// ckptfs_client_local_chunk_writes_total{result="local"|"fallback"} and
// ckptfs_client_local_chunk_write_bytes_total; the chunk request metrics
// (client/chunk_request_metrics.h) count only what went over the network
// (not the ADOPT requests, which the write counters stand for).
//
// Thread-safety: thread-safe, like every ChunkTransport. Lock order: mu_,
// then scratch_mu_ (never both held today).
#ifndef CKPTFS_CLIENT_LOCAL_CHUNK_TRANSPORT_H_
#define CKPTFS_CLIENT_LOCAL_CHUNK_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/chunk_transport.h"
#include "client/meta_client.h"
#include "common/huge_page_memory.h"
#include "common/unique_fd.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

// What a LocalChunkTransport does through the chunk files of local servers.
struct LocalChunkUse {
  bool reads = true;
  bool writes = true;
  // How long a server that answered an ADOPT with EOPNOTSUPP (a build
  // without it) is left out of writes in place before it is asked again
  // (it may have been upgraded): each ask costs one chunk written twice.
  absl::Duration adopt_retry = absl::Minutes(10);
};

class LocalChunkTransport : public ChunkTransport {
 public:
  // A 4096-aligned buffer that grows to the largest chunk file read into
  // it. Move-only; frees its memory.
  class Scratch {
   public:
    // Makes room for `n` bytes (contents not kept); false when out of memory.
    bool Reserve(size_t n);
    char* data() const { return memory_.data(); }

   private:
    // Huge pages: one O_DIRECT read of a whole chunk file is then one or
    // two block-layer segments, not one per 4 KiB page (huge_page_memory.h).
    HugePageMemory memory_;
  };

  // A storage server on this host: where its chunks are, and its LOCK file
  // open for checking that it runs.
  struct LocalServer {
    std::string data_dir;
    std::shared_ptr<const UniqueFd> lock;
    // Whether this process may create files in its tmp/ (write in place).
    bool writable = false;
  };

  using Use = LocalChunkUse;

  // Wraps `inner` (owned). `meta` (borrowed, must outlive this) answers
  // ListServers: once here (blocking, like the network transport's own
  // server map) and then every `refresh` (at least 10 ms) on a background
  // thread.
  LocalChunkTransport(std::unique_ptr<ChunkTransport> inner, MetaClient* meta,
                      absl::Duration refresh = absl::Seconds(10), Use use = Use());
  // Stops the refresh thread; waits for a ListServers in progress (at most
  // the metadata client's deadline, when the service is away).
  ~LocalChunkTransport() override;

  // `info` as a LocalServer when it is alive and on this host (see above);
  // nullopt otherwise.
  static std::optional<LocalServer> FindLocal(const meta::ServerInfo& info);
  // Whether the server whose LOCK file `lock_fd` is open holds its
  // running-lock.
  static bool ServerRuns(int lock_fd);

  // Reads chunk bytes [offset, offset + length) into buf from the chunk
  // file under `data_dir`, cut at the chunk's stored length (fewer bytes,
  // or none, when it ends earlier), after checking the file as the server
  // does. The whole file is read: its data straight into buf when offset
  // is 0, buf is 4096-aligned and `length` covers the padded data; else
  // into `scratch` and copied out. ENOENT when there is no such file; EIO
  // naming the file when a check fails or a read does (buf may then hold
  // anything). REQUIRES: buf holds `length` bytes.
  static absl::StatusOr<size_t> ReadChunkFile(const std::string& data_dir, uint64_t ino,
                                              uint64_t chunk_index, uint32_t offset, void* buf,
                                              size_t length, Scratch& scratch);

  // Writes the complete chunk file of chunk (ino, chunk_index) holding
  // data[0, length), whose CRC32C is `data_crc32c`, as a new file (mode
  // 0644) under `data_dir`'s tmp/ (never through a symbolic link there):
  // the header block through the page cache, where the server's check
  // reads it back without a disk read; the data with O_DIRECT where the
  // file system takes it, whole blocks straight from `data` and the last
  // partial block through a zero-padded copy. Returns the file's name in
  // tmp/ (IsLocalWriteName). On failure the file is removed (should that
  // fail too, the server's sweep removes it: no ADOPT names it).
  // REQUIRES: `data` 4096-aligned, length <= kMaxFramePayload.
  static absl::StatusOr<std::string> WriteChunkFile(const std::string& data_dir, uint64_t ino,
                                                    uint32_t chunk_index, const void* data,
                                                    size_t length, uint32_t data_crc32c);

  using ChunkTransport::WriteChunk;
  absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, uint32_t offset,
                          const void* data, size_t length, bool replace,
                          std::optional<uint32_t> crc32c) override;
  absl::Status AdoptChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                          const std::string& tmp_name, uint32_t data_length,
                          uint32_t data_crc32c) override {
    return inner_->AdoptChunk(server_id, ino, chunk_index, tmp_name, data_length, data_crc32c);
  }
  absl::Status FillChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, const void* data,
                         size_t length) override {
    return inner_->FillChunk(server_id, ino, chunk_index, data, length);
  }
  absl::StatusOr<size_t> ReadChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                   uint32_t offset, void* buf, size_t length) override;
  absl::Status TrimChunks(uint32_t server_id, uint64_t ino, uint64_t trim_size,
                          uint32_t chunk_size) override {
    return inner_->TrimChunks(server_id, ino, trim_size, chunk_size);
  }
  absl::Status SyncChunks(uint32_t server_id, uint64_t ino) override {
    return inner_->SyncChunks(server_id, ino);
  }
  // The wrapped transport records the writes in place too: each ends in
  // its ADOPT, whose reply names the server's incarnation.
  void TrackWrites(UnsyncedWrites* writes) override { inner_->TrackWrites(writes); }

 private:
  // `server_id` when it is local and runs now.
  std::optional<LocalServer> RunningLocal(uint32_t server_id);
  // Writes the chunk as a file in `local`'s tmp/ and has the server adopt
  // it: true when it did; false when it did not and nothing is left
  // behind, so the caller sends the chunk over the network; an error when
  // a refused file could not be removed (sending the chunk again then
  // could let a late ADOPT of that file land after the resend).
  absl::StatusOr<bool> WriteInPlace(const LocalServer& local, uint32_t server_id, uint64_t ino,
                                    uint32_t chunk_index, const void* data, size_t length,
                                    uint32_t crc32c);
  // Replaces the map with what ListServers says now; keeps it when the
  // call fails. REQUIRES: mu_ not held.
  void Reload();
  void RefreshLoop();
  // A scratch buffer for one read, and its return.
  Scratch TakeScratch();
  void GiveScratch(Scratch scratch);

  const std::unique_ptr<ChunkTransport> inner_;
  MetaClient* const meta_;
  const absl::Duration refresh_;
  const Use use_;

  absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, LocalServer> local_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Servers that answered an ADOPT with EOPNOTSUPP (an older build), and
  // until when their chunks go over the network without asking.
  absl::flat_hash_map<uint32_t, absl::Time> cannot_adopt_ ABSL_GUARDED_BY(mu_);

  absl::Mutex scratch_mu_;
  // Idle scratch buffers, at most kIdleScratch kept.
  std::vector<Scratch> idle_scratch_ ABSL_GUARDED_BY(scratch_mu_);

  std::thread refresher_;  // last: started once everything above is ready
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_LOCAL_CHUNK_TRANSPORT_H_
