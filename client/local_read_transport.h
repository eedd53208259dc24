// LocalReadTransport: a ChunkTransport that reads the chunks of storage
// servers running on this host straight from their chunk files, and hands
// everything else (writes, fills, trims, syncs, reads of other servers) to
// the transport it wraps. HDFS calls this a short-circuit local read.
//
// Why: on a node that runs both a mount and a storage server (`ckptfs up`,
// or a training node lending its flash to the cluster), a read over
// loopback TCP costs the server's disk read into its buffer, a send copy, a
// receive copy and two event loops. Read in place, a chunk costs one
// O_DIRECT read into a small aligned bounce buffer and one copy out of it.
//
// Which servers are local: ListServers names each server's data directory
// (ServerInfo.data_dir) and identity (uuid). A server counts as local when
// the metadata service calls it alive, this process can read
// <data_dir>/server.uuid holding that uuid (so a directory of the same name
// on another host, or of another cluster, never matches) and the pid the
// server wrote into <data_dir>/LOCK is a process this one can see. The map
// is loaded on first use and again once `refresh` has passed, by one reader
// while the others go on with the old map. Every read checks again that the
// server's process runs: once it has died (or restarted, until the next
// load), reads go to the network like everyone else's, so a dead server's
// files are never read in its place.
//
// Why reading in place is safe: a server changes a chunk file only by the
// atomic rename (or unlink) of a complete file (server/storage/chunk_store.h),
// so an open file is one complete version, and each read checks what the
// server's read checks: the header (magic, its own CRC, that it names this
// chunk) and the CRC32C of the whole chunk's data. Whatever is unusual — no
// such file (a hole, or a chunk the scrubber set aside), a CRC that fails,
// an I/O error, a file that cannot be opened — is not judged here: the read
// goes to the server through the wrapped transport, whose answer is the
// server's (ENOENT, or EIO once it has quarantined the chunk).
//
// Metrics: ckptfs_client_local_chunk_reads_total{result="local"|"fallback"}
// and ckptfs_client_local_chunk_read_bytes_total; the chunk request metrics
// (client/chunk_request_metrics.h) count only what went to a server.
//
// Thread-safety: thread-safe, like every ChunkTransport. Each calling thread
// keeps one bounce buffer (kBouncePieceBytes) for as long as it lives.
#ifndef CKPTFS_CLIENT_LOCAL_READ_TRANSPORT_H_
#define CKPTFS_CLIENT_LOCAL_READ_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <sys/types.h>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/chunk_transport.h"
#include "client/meta_client.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

class LocalReadTransport : public ChunkTransport {
 public:
  // Bytes read from a chunk file per O_DIRECT read (a multiple of 4096).
  static constexpr size_t kBouncePieceBytes = size_t{1} << 20;

  // Wraps `inner` (owned). `meta` (borrowed, must outlive this) answers
  // ListServers.
  LocalReadTransport(std::unique_ptr<ChunkTransport> inner, MetaClient* meta,
                     absl::Duration refresh = absl::Seconds(10));

  // A storage server on this host: where its chunks are and its process.
  struct LocalServer {
    std::string data_dir;
    pid_t pid = 0;
  };

  // `info` as a LocalServer when it is alive and on this host (see above);
  // nullopt otherwise.
  static std::optional<LocalServer> FindLocal(const meta::ServerInfo& info);

  // Reads chunk bytes [offset, offset + length) from the chunk file under
  // `data_dir`, cut at the chunk's stored length, after checking it as the
  // server would. nullopt when the file is missing or anything about it is
  // not right (the caller then asks the server).
  static std::optional<size_t> ReadChunkFile(const std::string& data_dir, uint64_t ino,
                                             uint64_t chunk_index, uint32_t offset, void* buf,
                                             size_t length);

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
  // `server_id` when it is local and its process runs, reloading the map
  // when due.
  std::optional<LocalServer> LocalServerOf(uint32_t server_id);
  void Reload();

  const std::unique_ptr<ChunkTransport> inner_;
  MetaClient* const meta_;
  const absl::Duration refresh_;

  absl::Mutex mu_;
  // Local servers only, by id.
  absl::flat_hash_map<uint32_t, LocalServer> local_ ABSL_GUARDED_BY(mu_);
  absl::Time loaded_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool reloading_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_LOCAL_READ_TRANSPORT_H_
