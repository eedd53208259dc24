// BlockingChunkTransport: ChunkTransport over the framed data protocol
// (common/data_connection.h), with a pool of idle connections per storage
// server and one blocking connection per request in flight. The Client uses
// UringChunkTransport by default; this one stays selectable
// (ClientOptions::data_transport) for comparison and as the fallback where
// io_uring is unavailable.
//
// Server ids map to addresses through the metadata service's ListServers;
// the map is refreshed when an unknown id shows up or a connection to a
// server fails (it may have restarted elsewhere). A request that fails on
// the transport (reset, timeout, garbage) drops its connection and is sent
// once more on a fresh one; every request is safe to repeat (WRITE at a
// fixed offset, READ, TRIM to a size, SYNC), and each attempt of a WRITE or
// TRIM is stamped (client/resend_stamp.h) so that the server drops the
// earlier attempt if it is applied only after the resend. A WRITE that
// timed out is not resent. An error the server reports (ENOSPC, ENOENT,
// ...) is returned as is and keeps the connection.
//
// Thread-safety: thread-safe. Connections are used by one thread at a time
// (taken from the pool for one request); the lock is never held across
// network I/O.
#ifndef CKPTFS_CLIENT_BLOCKING_CHUNK_TRANSPORT_H_
#define CKPTFS_CLIENT_BLOCKING_CHUNK_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/chunk_transport.h"
#include "client/meta_client.h"
#include "client/resend_stamp.h"
#include "common/data_connection.h"
#include "common/tcp.h"

namespace ckptfs::client {

class BlockingChunkTransport : public ChunkTransport {
 public:
  // `meta` (borrowed, must outlive this) answers ListServers; `timeout`
  // bounds each connect and each request.
  // `credential`: the cluster's, presented (HELLO) on every new connection;
  // empty: none.
  BlockingChunkTransport(MetaClient* meta, absl::Duration timeout, std::string credential = "");

  // Loads the server map now (Client::Connect calls it so that an
  // unreachable service fails the connect, not the first write).
  absl::Status RefreshServers();

  using ChunkTransport::WriteChunk;
  absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, uint32_t offset,
                          const void* data, size_t length, bool replace,
                          std::optional<uint32_t> crc32c) override;
  absl::Status FillChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, const void* data,
                         size_t length) override;
  absl::Status AdoptChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                          const std::string& tmp_name, uint32_t data_length,
                          uint32_t data_crc32c) override;
  absl::StatusOr<size_t> ReadChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                   uint32_t offset, void* buf, size_t length) override;
  absl::Status TrimChunks(uint32_t server_id, uint64_t ino, uint64_t trim_size,
                          uint32_t chunk_size) override;
  absl::Status SyncChunks(uint32_t server_id, uint64_t ino) override;

 private:
  // Idle connections kept per server beyond which finished ones are closed.
  static constexpr size_t kMaxIdlePerServer = 64;

  struct Server {
    HostPort address;
    std::vector<std::unique_ptr<DataConnection>> idle;
  };

  // Sends one request to `server_id` and returns the response; see the
  // class comment for the retry rule.
  absl::StatusOr<DataConnection::Response> Call(uint32_t server_id,
                                                const data::RequestHeader& request,
                                                const void* payload, size_t payload_len, void* out,
                                                size_t out_capacity);
  // An idle connection to the server, or a new one.
  absl::StatusOr<std::unique_ptr<DataConnection>> Take(uint32_t server_id);
  void Return(uint32_t server_id, std::unique_ptr<DataConnection> conn);
  absl::StatusOr<HostPort> AddressOf(uint32_t server_id);

  MetaClient* const meta_;
  const absl::Duration timeout_;
  const std::string credential_;
  ResendStamp stamp_;  // WRITE and TRIM attempts, for the server's ordering
  absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, Server> servers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_BLOCKING_CHUNK_TRANSPORT_H_
