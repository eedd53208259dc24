// Connection: one client's TCP connection, served by an EventLoop's
// io_uring: no thread of its own, many requests in flight.
//
// Receiving: a frame's 12-byte prefix, then its header, then — once the
// request's buffer is taken from the PayloadArena — its payload, straight into
// that buffer (its only copy in user space). The request then goes to the
// disk workers and the next frame is read at once, so a client may pipeline
// requests; replies are sent in the order the disk finishes them, matched by
// request_id. Short receives and sends are resumed where they stopped;
// EAGAIN, EINTR and ENOBUFS are retried.
//
// Backpressure: while the pool has no room for a request's buffer, or
// while `max_in_flight` requests of the connection are unanswered, the
// connection does not read its socket, and TCP slows the client down.
//
// Errors: a stream that cannot be trusted any more — bad magic, an
// oversized header or payload length, a header that does not parse — gets
// one error frame (request_id 0, EBADMSG or EMSGSIZE, saying what was
// wrong; replies not yet started are dropped) and a lingering close: after
// the frame is sent the connection says FIN and reads and drops the peer's
// input (bounded in bytes and time) so that the peer can finish its send and
// read why. Errors of a well-formed request are replied and the connection
// goes on. A peer that closes (even inside a frame) or stalls inside a frame
// or on its replies for `stall_timeout` is closed: requests it has in flight
// finish, their replies are dropped, and the connection's buffers return to
// the pool. Nothing a peer sends affects other connections.
//
// Authentication: when the loop has a credential, the first frame must be a
// HELLO carrying it (proto/data.proto). Anything else, or a wrong one, gets
// one error frame (EACCES, saying which flag to give the client) and the
// lingering close, and a warning naming the peer (rate-limited: a scan
// cannot fill the log); a right one is answered at once (no disk) and the
// connection goes on as usual. HELLO is answered on every connection, with
// or without a credential, once: a second one is a protocol error (EPROTO).
// A connection that has not presented the credential within 3 s is closed,
// and a host holds at most a few such connections at once (the server's
// StrangerLimit), so strangers cannot hold the max_connections slots.
//
// Ownership: owned by its EventLoop, which destroys it once Finished().
// Thread-safety: loop thread only.
#ifndef CKPTFS_SERVER_STORAGE_CONNECTION_H_
#define CKPTFS_SERVER_STORAGE_CONNECTION_H_

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/frame.h"
#include "common/unique_fd.h"
#include "server/storage/payload_arena.h"
#include "server/storage/request.h"
#include "server/storage/stranger_limit.h"

namespace ckptfs::storage {

class EventLoop;

class Connection {
 public:
  // The requests covered by one zero-copy send, kept until the kernel says
  // it no longer reads their memory.
  struct ZeroCopySend {
    Connection* connection;
    std::vector<Request*> requests;
  };

  // `served`: counts as a served connection (not a refused one).
  // `stranger`: its place among its host's unauthenticated connections.
  Connection(UniqueFd socket, std::string peer, EventLoop& loop, bool served,
             StrangerLimit::Ticket stranger = {});
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Starts reading frames; with a non-OK `refusal`, only tells the peer why
  // (an error frame) and closes.
  void Start(const absl::Status& refusal);

  // Completions of this connection's operations (res as in the CQE).
  void OnRecv(int res);
  void OnSend(int res, uint32_t flags, ZeroCopySend* zero_copy);
  // A request's buffer, granted by the pool after a wait.
  void OnBufferGranted(PayloadArena::Lease lease);
  // A request back from the disk workers.
  void OnDone(std::unique_ptr<Request> request);
  // Submits what could not be submitted earlier (the ring was full).
  void Resume();
  // Closes the connection if it stalled or lingered long enough.
  void Tick(absl::Time now);

  // Closes now: no more reading or sending. `why` (if not empty) is logged.
  void Close(absl::string_view why);

  // True once closed with nothing of it left in flight anywhere: the loop
  // may destroy it.
  bool Finished() const;

  bool served() const { return served_; }
  const std::string& peer() const { return peer_; }
  std::list<std::unique_ptr<Connection>>::iterator self;  // the loop's handle
  bool retry_queued = false;  // in the loop's list of connections to Resume()

 private:
  enum class Phase {
    kPrefix,      // a frame's prefix (idle while none of it has come)
    kHeader,      // its header
    kWaitBuffer,  // waiting for the pool to grant its buffer
    kPayload,     // its payload, into the request's buffer
    kDiscard,     // a payload its op has no use for, dropped
    kPaused,      // too many requests in flight: not reading
    kErrorSent,   // an error frame queued: nothing more is read
    kLinger,      // after the error frame: reading and dropping input
    kClosed,
  };

  void StartRecv();
  void StartSend();
  void OnFrameBytes(size_t n);
  void OnPrefix();
  void OnHeader();
  void UseLease(PayloadArena::Lease lease);
  void AfterBuffer();
  void Dispatch();
  void NextFrame();
  // Sends `status` as an error frame with request_id 0 and closes after it.
  // `logged`: the caller already logged why.
  void Fail(const absl::Status& status, bool logged = false);
  // The credential check of a request received before the connection was
  // authenticated; false if it refused the connection (Fail done).
  bool Authenticate(const data::RequestHeader& header);
  // Answers a HELLO (already checked) without the disk workers.
  void AnswerHello();
  // Drops replies not yet started (the stream is ending).
  void DropUnsentReplies();
  // Retires requests whose replies were sent completely.
  void Advance(size_t sent);
  void ReleaseZeroCopy(ZeroCopySend* send);
  void Retire(std::unique_ptr<Request> request);
  void RetryLater();

  UniqueFd socket_;
  // Released when the connection authenticates or closes; declared after
  // socket_ so that it goes first (stranger_limit.h).
  StrangerLimit::Ticket stranger_;
  const std::string peer_;
  EventLoop& loop_;
  const bool served_;

  Phase phase_ = Phase::kPrefix;
  bool closed_ = false;
  bool recv_pending_ = false;
  bool send_pending_ = false;
  // The last receive / send failed with EAGAIN (a non-blocking socket): the
  // next one waits for readiness first (IORING_RECVSEND_POLL_FIRST).
  bool recv_poll_first_ = false;
  bool send_poll_first_ = false;
  int zero_copy_notifications_ = 0;  // zero-copy sends awaiting their notification
  // The pool has queued this connection's request (0: not waiting) / has
  // granted it, and the lease is on its way through the loop's mailbox.
  uint64_t ticket_ = 0;
  bool grant_pending_ = false;
  size_t in_flight_ = 0;  // requests received whose replies are not sent
  // A HELLO with the loop's credential came (or the loop has none).
  bool authenticated_ = false;
  bool hello_seen_ = false;                // a second HELLO is refused
  const absl::Time opened_ = absl::Now();  // an unauthenticated one closes kHelloTimeout after

  // The frame being received.
  char prefix_[kFramePrefixSize];
  FramePrefix frame_;
  std::string header_bytes_;
  size_t got_ = 0;           // bytes of the current part received
  size_t discard_left_ = 0;  // kDiscard / kLinger: bytes still to drop
  std::unique_ptr<Request> request_;
  absl::Time last_recv_ = absl::InfinitePast();  // last progress receiving
  absl::Time last_send_ = absl::InfinitePast();  // last progress sending
  absl::Time linger_until_ = absl::InfiniteFuture();

  // Replies in the order they are sent; the front may be partly sent.
  std::deque<std::unique_ptr<Request>> out_;
  // Sent replies whose memory a zero-copy send may still read.
  std::vector<std::unique_ptr<Request>> zero_copy_held_;
  std::vector<iovec> iov_;  // the send in flight
  size_t sending_ = 0;      // replies (from the front of out_) it covers
  msghdr msg_{};
  ZeroCopySend* zero_copy_send_ = nullptr;  // the send in flight, if zero-copy
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_CONNECTION_H_
