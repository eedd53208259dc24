// Connection: serves one client's TCP connection on the thread that calls
// Run(), with blocking socket I/O (the io_uring network path is a later
// step; RequestHandler is shared with it).
//
// Per frame: validate the prefix, parse the header, receive the payload
// straight into an aligned buffer (its only copy in user space), execute it
// with RequestHandler and send the reply. A stream that cannot be trusted
// any more — bad magic, an oversized header or payload length, a header that
// does not parse — gets one error frame (request_id 0, EBADMSG or EMSGSIZE,
// saying what was wrong) and is closed, since the next frame boundary is
// unknown. Errors of a well-formed request are replied and the connection
// goes on. Nothing a peer sends affects other connections.
//
// Ownership: owns the socket and its io_uring Ring; payload buffers come
// from the server's BufferPool, and their bytes from its MemoryBudget, for
// the duration of one request.
// Thread-safety: Run() on one thread; Shutdown() and finished() from any.
#ifndef CKPTFS_SERVER_STORAGE_CONNECTION_H_
#define CKPTFS_SERVER_STORAGE_CONNECTION_H_

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "common/unique_fd.h"
#include "server/storage/buffer_pool.h"
#include "server/storage/memory_budget.h"
#include "server/storage/request_handler.h"

namespace ckptfs::storage {

class Connection {
 public:
  // `handler`, `buffers` and `budget` are shared with the other connections and must
  // outlive this one.
  Connection(UniqueFd socket, std::string peer, RequestHandler& handler, BufferPool& buffers,
             MemoryBudget& budget)
      : socket_(std::move(socket)),
        peer_(std::move(peer)),
        handler_(handler),
        buffers_(buffers),
        budget_(budget) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Serves frames until the peer closes, the stream breaks or Shutdown().
  // The socket is shut down (the peer sees the close) before it returns;
  // it is closed when the Connection is destroyed.
  void Run();

  // Makes Run() return soon: shuts the socket down in both directions.
  void Shutdown();

  // True once Run() has returned.
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  const std::string& peer() const { return peer_; }

 private:
  absl::Status Serve();
  // Reads and drops the peer's input until it closes, or a bounded amount
  // or time has passed.
  void DrainInput();
  // Sends an error frame; the status' errno (EIO if none) and message.
  absl::Status SendError(uint64_t request_id, const absl::Status& status);

  UniqueFd socket_;
  const std::string peer_;
  RequestHandler& handler_;
  BufferPool& buffers_;
  MemoryBudget& budget_;
  std::atomic<bool> finished_{false};
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_CONNECTION_H_
