// UringChunkTransport: ChunkTransport over the framed data protocol with
// many requests in flight per connection, all carried by one event-loop
// thread with an io_uring (client/uring_data_loop.h). The Client's default.
//
// Each storage server gets up to `connections_per_server` connections,
// dialed on demand (a new one only while every existing one is busy). A
// call picks the least loaded connection, queues its request on the loop
// and waits for the reply, which the server may send in any order (matched
// by request_id). READ payloads land straight in the caller's buffer; WRITE
// payloads go from the caller's buffer to the socket.
//
// Server ids map to addresses through the metadata service's ListServers;
// the map is refreshed when an unknown id shows up or a connection fails
// (the server may have restarted elsewhere). A transport failure (reset,
// close, garbage, no reply by the per-request deadline `timeout`) fails
// every request in flight on that connection; each is then sent once more
// on a fresh connection (the server's other connections dialed before the
// failure are retired), as BlockingChunkTransport does: every request is safe
// to repeat, except that a WRITE sent in full on a connection that timed
// out is not (the slow server may still apply it, after a newer write of
// the chunk). A request that never left the client is resent freely. Every
// attempt of a WRITE or TRIM is stamped (client/resend_stamp.h) so that the
// server drops an earlier attempt still in its queue once a resend is
// applied: the late original never lands after a newer write of the chunk.
// An error the server reports (ENOSPC, ENOENT, ...) is returned as is.
//
// Thread-safety: thread-safe; calls block their caller until answered. Lock
// order: mu_ before the loop's queue lock. The destructor REQUIRES that no
// call is in flight.
#ifndef CKPTFS_CLIENT_URING_CHUNK_TRANSPORT_H_
#define CKPTFS_CLIENT_URING_CHUNK_TRANSPORT_H_

#include <atomic>
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
#include "client/uring_data_loop.h"
#include "common/tcp.h"
#include "proto/data.pb.h"

namespace ckptfs::client {

class UringChunkTransport : public ChunkTransport {
 public:
  struct Options {
    // Connections to each storage server (at least 1).
    int connections_per_server = 2;
    // The cluster's credential, presented (HELLO) on each connection as it
    // is dialed, before the loop takes it; empty: none.
    std::string credential;
    UringDataLoop::Options loop;
  };

  // Starts the event loop. `meta` (borrowed, must outlive this) answers
  // ListServers; `timeout` bounds each connect and each request (from the
  // call to its reply). Fails when io_uring is unavailable.
  static absl::StatusOr<std::unique_ptr<UringChunkTransport>> Create(MetaClient* meta,
                                                                     absl::Duration timeout,
                                                                     const Options& options);

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

  const UringDataLoop::Counters& loop_counters() const { return loop_->counters(); }

 private:
  // A connection in the registry, with the server's epoch when it was
  // dialed: a failure retires the connections of its epoch and older.
  struct Link {
    std::shared_ptr<DataConnection> conn;
    uint64_t epoch = 0;
  };
  struct Server {
    HostPort address;
    uint64_t epoch = 0;
    std::vector<Link> links;
    int dialing = 0;
  };
  struct Response {
    data::ResponseHeader header;
    size_t payload_len = 0;
  };

  UringChunkTransport(MetaClient* meta, absl::Duration timeout, const Options& options,
                      std::unique_ptr<UringDataLoop> loop);

  // Sends `request` to the server and returns its reply; see the class
  // comment for the retry rule.
  absl::StatusOr<Response> Call(uint32_t server_id, data::RequestHeader request,
                                const void* payload, size_t payload_len, void* out,
                                size_t out_capacity);
  // The connection for the next request: an idle one, a new one while under
  // the limit, else the least loaded (waiting for a dial in progress).
  absl::StatusOr<Link> PickLink(uint32_t server_id);
  // Drops `link` and retires the server's connections of its epoch or older.
  void LinkFailed(uint32_t server_id, const Link& link);
  absl::StatusOr<HostPort> AddressOf(uint32_t server_id);

  MetaClient* const meta_;
  const absl::Duration timeout_;
  const Options options_;
  const std::unique_ptr<UringDataLoop> loop_;
  std::atomic<uint64_t> next_request_id_{1};
  ResendStamp stamp_;  // WRITE and TRIM attempts, for the server's ordering
  absl::Mutex mu_;
  absl::CondVar dial_done_;  // signalled when a dial ends
  absl::flat_hash_map<uint32_t, Server> servers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_URING_CHUNK_TRANSPORT_H_
