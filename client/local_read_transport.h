// LocalReadTransport: a ChunkTransport that reads the chunks of storage
// servers running on this host straight from their chunk files, and hands
// everything else (writes, fills, trims, syncs, reads of other servers) to
// the transport it wraps. HDFS calls this a short-circuit local read.
//
// Why: on a node that runs both a mount and a storage server (`ckptfs up`,
// or a training node lending its flash to the cluster), a read over
// loopback TCP costs the server's disk read into its buffer, a send copy, a
// receive copy and two event loops. Read in place, a chunk costs one
// O_DIRECT read of its whole file (as the server reads it): a whole-chunk
// read into a ChunkBuffer (aligned, on huge pages) takes the data straight
// from the disk with no copy, any other read goes into a scratch buffer on
// huge pages and is copied out. On the reference VM that is
// a third less CPU per GiB loaded and loads 1.14-1.27x faster than over
// loopback TCP (issue 5, stop 18; on 4 KiB pages the O_DIRECT reads were
// split into ~1 MiB device requests and ran slower than TCP). The mount
// turns it on by default (ckptfs-fuse --local_reads); a library Client only
// when ClientOptions::local_reads asks, since library callers (tests, the
// bench's --native ranks) stand in for remote nodes.
//
// Which servers are local: ListServers names each server's data directory
// (ServerInfo.data_dir) and identity (uuid). A server counts as local when
// the metadata service calls it alive, this process can read
// <data_dir>/server.uuid holding that uuid (a directory of the same name
// that belongs to another server or cluster never matches), and the server
// holds its running-lock: an OFD read lock on <data_dir>/LOCK
// (server/storage/data_dir.h), which the kernel drops the moment the
// server's process dies, whatever pid namespace it lives in. Every read
// checks that lock again (one fcntl), so a dead server's files are never
// read in its place: its reads go to the network and fail over to another
// copy like everyone else's. The map is loaded at construction and again
// every `refresh` by a background thread, so no read waits for the
// metadata service.
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
// What it does not do: a local read has no deadline (a local disk that
// hangs hangs the reader, as it hangs the server), and it skips the data
// path's credential: the chunk files' own permissions decide, as for any
// local file (a mount that cannot open them reads over TCP).
//
// Metrics: ckptfs_client_local_chunk_reads_total{result="local"|"missing"|
// "rejected"} and ckptfs_client_local_chunk_read_bytes_total; the chunk
// request metrics (client/chunk_request_metrics.h) count only what went to
// a server.
//
// Thread-safety: thread-safe, like every ChunkTransport. Lock order: mu_,
// then scratch_mu_ (never both held today).
#ifndef CKPTFS_CLIENT_LOCAL_READ_TRANSPORT_H_
#define CKPTFS_CLIENT_LOCAL_READ_TRANSPORT_H_

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

class LocalReadTransport : public ChunkTransport {
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
  };

  // Wraps `inner` (owned). `meta` (borrowed, must outlive this) answers
  // ListServers: once here (blocking, like the network transport's own
  // server map) and then every `refresh` (at least 10 ms) on a background
  // thread.
  LocalReadTransport(std::unique_ptr<ChunkTransport> inner, MetaClient* meta,
                     absl::Duration refresh = absl::Seconds(10));
  // Stops the refresh thread; waits for a ListServers in progress (at most
  // the metadata client's deadline, when the service is away).
  ~LocalReadTransport() override;

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

  using ChunkTransport::WriteChunk;
  absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                          uint32_t offset, const void* data, size_t length, bool replace,
                          std::optional<uint32_t> crc32c) override {
    return inner_->WriteChunk(server_id, ino, chunk_index, offset, data, length, replace,
                              crc32c);
  }
  absl::Status FillChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                         const void* data, size_t length) override {
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

 private:
  // `server_id` when it is local and runs now.
  std::optional<LocalServer> RunningLocal(uint32_t server_id);
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

  absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, LocalServer> local_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex scratch_mu_;
  // Idle scratch buffers, at most kIdleScratch kept.
  std::vector<Scratch> idle_scratch_ ABSL_GUARDED_BY(scratch_mu_);

  std::thread refresher_;  // last: started once everything above is ready
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_LOCAL_READ_TRANSPORT_H_
