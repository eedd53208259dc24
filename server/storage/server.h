// Server: the storage server's data-path listener. An accept thread takes
// TCP connections and runs each on its own thread (connection.h), all
// sharing one RequestHandler over the ChunkStore.
//
// Usable in-process: Start() on 127.0.0.1:0 and ask port(); Stop() closes
// the listener, shuts every connection down and joins every thread.
// Finished connections are reaped on the next accept, so threads and
// sockets do not pile up.
//
// Ownership: the ChunkStore is borrowed and must outlive the Server.
// Thread-safety: port()/address() from any thread; Stop() (also run by the
// destructor) from one thread, not from a connection thread.
#ifndef CKPTFS_SERVER_STORAGE_SERVER_H_
#define CKPTFS_SERVER_STORAGE_SERVER_H_

#include <list>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/net.h"
#include "common/unique_fd.h"
#include "server/storage/buffer_pool.h"
#include "server/storage/chunk_store.h"
#include "server/storage/connection.h"
#include "server/storage/memory_budget.h"
#include "server/storage/request_handler.h"

namespace ckptfs::storage {

class Server {
 public:
  // Listens on `listen` (port 0 picks a free port) and starts accepting.
  // A busy port fails with EADDRINUSE and a message naming the address.
  struct Options {
    // Idle I/O buffers kept for reuse, at most.
    size_t max_pooled_buffer_bytes = 256u << 20;
    // Connections served at once; more are told EAGAIN and closed.
    size_t max_connections = 4096;
    // Payload bytes all requests in flight may hold together (MemoryBudget).
    size_t memory_budget_bytes = size_t{1} << 30;
  };

  static absl::StatusOr<std::unique_ptr<Server>> Start(ChunkStore& store,
                                                       const HostPort& listen,
                                                       Options options);
  static absl::StatusOr<std::unique_ptr<Server>> Start(ChunkStore& store,
                                                       const HostPort& listen) {
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
  size_t active_connections();

 private:
  struct Active {
    std::unique_ptr<Connection> connection;
    std::thread thread;
  };

  Server(ChunkStore& store, UniqueFd listen_fd, HostPort address, Options options)
      : options_(options),
        buffers_(options.max_pooled_buffer_bytes),
        budget_(options.memory_budget_bytes),
        handler_(store, buffers_),
        listen_fd_(std::move(listen_fd)),
        address_(std::move(address)) {}
  void AcceptLoop();
  // Tells a connection over the limit why it is closed.
  void Refuse(UniqueFd socket);
  // Joins and drops connections whose Run() returned.
  void ReapFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  BufferPool buffers_;
  MemoryBudget budget_;
  RequestHandler handler_;
  UniqueFd listen_fd_;
  const HostPort address_;
  std::thread accept_thread_;
  absl::Mutex mu_;  // leaf lock
  std::list<Active> connections_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_SERVER_H_
