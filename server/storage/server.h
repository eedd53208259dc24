// Server: the storage server's data path. A few network event loops
// (event_loop.h, one io_uring each) serve every connection — no thread per
// connection — and a fixed pool of disk workers (disk_workers.h) runs the
// requests against the ChunkStore. Payloads live in a PayloadArena allocated
// at start-up, so the server's memory does not grow with connections,
// requests in flight or chunks stored.
//
// The first loop accepts and spreads new connections over all loops, round
// robin. Over max_connections, a new connection is told EAGAIN (an error
// frame) and closed. With a credential, a connection that does not open
// with a HELLO carrying it is told EACCES and closed (connection.h), and
// one peer host holds at most max_strangers_per_host connections that have
// not presented it yet (stranger_limit.h).
//
// Usable in-process: Start() on 127.0.0.1:0 and ask port(); Stop() closes
// the listener and every connection, waits for requests in flight on disk,
// and joins every thread.
//
// Metrics (common/metrics, the default registry): requests, latency, bytes
// and errors by op (request_handler.cc), requests in flight
// (connection.cc), and, computed at scrape time while the Server runs, its
// buffer pool's capacity/use and the chunks' file system's capacity/free.
//
// Ownership: the ChunkStore is borrowed and must outlive the Server.
// Thread-safety: address(), port(), active_connections(), stats() and
// buffer_pool() from any thread; Stop() (also run by the destructor) from
// one thread, not from a loop or worker thread.
#ifndef CKPTFS_SERVER_STORAGE_SERVER_H_
#define CKPTFS_SERVER_STORAGE_SERVER_H_

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "common/tcp.h"
#include "common/unique_fd.h"
#include "server/storage/chunk_store.h"
#include "server/storage/disk_workers.h"
#include "server/storage/event_loop.h"
#include "server/storage/payload_arena.h"
#include "server/storage/request_handler.h"
#include "server/storage/stranger_limit.h"

namespace ckptfs::storage {

// The smallest buffer pool a server runs with: the largest request alone
// (a READ of a whole 64 MiB chunk file) must fit, or it would wait forever.
inline constexpr size_t kMinBufferPoolBytes = ChunkFileSize(kMaxChunkLength);

class Server {
 public:
  struct Options {
    // Network event loops (threads), each with its own io_uring.
    size_t net_threads = 2;
    // Disk worker threads, each with its own io_uring.
    size_t disk_threads = 8;
    // Payload memory, allocated at start-up (at least kMinBufferPoolBytes).
    // 256 MiB: 64 writers each with a 4 MiB chunk in flight.
    size_t buffer_pool_bytes = size_t{256} << 20;
    // Connections served at once; more are told EAGAIN and closed.
    size_t max_connections = 4096;
    // With a credential: connections one peer host may hold before they
    // authenticate; another shuts the oldest down (stranger_limit.h).
    size_t max_strangers_per_host = 32;
    // Submission queue entries of each network ring.
    unsigned ring_entries = 256;
    // Send replies with IORING_OP_SENDMSG_ZC instead of copying them into
    // the socket. Off by default: over loopback the kernel copies at local
    // delivery anyway, and it measured no faster (storage_bench); it may pay
    // on a real NIC.
    bool zero_copy_send = false;
    // A peer that stalls inside a frame, or does not read its replies, for
    // this long loses its connection. Idle time between frames is unlimited.
    absl::Duration stall_timeout = absl::Seconds(60);
    // Unanswered requests per connection; at the limit it is not read.
    size_t max_requests_per_connection = 256;
    // See EventLoop::Options::nonblocking_sockets (tests of EAGAIN).
    bool nonblocking_sockets = false;
    // The cluster credential (common/credential.h) each connection must
    // present in a HELLO before anything else; empty: anyone is served.
    std::string credential;
    // The cluster's server credential (the metadata service's connections
    // present it), taken in a HELLO as well; empty: none other.
    std::string server_credential;
  };

  // Sums over the loops, for tests and measurements.
  struct Stats {
    uint64_t sq_full = 0;
    uint64_t sends = 0;
    uint64_t zero_copy_sends = 0;
    uint64_t recvs = 0;
    uint64_t retries = 0;
    bool fixed_disk_buffers = false;
  };

  // Listens on `listen` (port 0 picks a free port) and starts serving.
  // A busy port fails with EADDRINUSE and a message naming the address.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ChunkStore& store, const HostPort& listen,
                                                       Options options);
  static absl::StatusOr<std::unique_ptr<Server>> Start(ChunkStore& store, const HostPort& listen) {
    return Start(store, listen, Options());
  }

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server() { Stop(); }

  // The bound address: the listen host with the actual port.
  const HostPort& address() const { return address_; }
  uint16_t port() const { return address_.port; }

  // Stops accepting, closes every connection and joins all threads.
  // Idempotent.
  void Stop();

  // Connections currently being served (for tests and status).
  size_t active_connections() const { return connections_.load(); }
  // Unauthenticated connections shut down to make room for newer ones of
  // their host, since start.
  uint64_t strangers_evicted() const { return strangers_.evicted(); }
  Stats stats() const;
  PayloadArena& buffer_pool() { return *pool_; }

 private:
  Server(ChunkStore& store, HostPort address, Options options)
      : options_(options),
        handler_(store),
        address_(std::move(address)),
        strangers_(std::max<size_t>(options.max_strangers_per_host, 1)) {}
  // The scrape-time gauges of the pool and the disk (metrics.h): buffer-pool
  // capacity/used/waiting, disk capacity/free.
  static std::vector<metrics::CallbackHandle> AddGauges(PayloadArena* pool, ChunkStore* store);
  // On the first loop's thread: picks a loop for a new connection.
  void OnAccept(UniqueFd socket, std::string peer);

  const Options options_;
  RequestHandler handler_;
  const HostPort address_;
  // Outlives the loops, whose connections hold its tickets.
  StrangerLimit strangers_;
  std::unique_ptr<PayloadArena> pool_;
  std::unique_ptr<DiskWorkers> disk_;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  UniqueFd listen_fd_;
  std::atomic<size_t> connections_{0};
  size_t next_loop_ = 0;  // first loop's thread only
  bool stopped_ = false;
  // Dropped by Stop, before the pool they read.
  std::vector<metrics::CallbackHandle> metric_callbacks_;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_SERVER_H_
