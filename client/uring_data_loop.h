// UringDataLoop: one thread with an io_uring that carries data-path frames
// (common/frame.h) over a few TCP connections to storage servers, with many
// requests in flight on each and replies matched by request_id in whatever
// order the server sends them.
//
// A caller builds a DataCall (the request's encoded frame head, its payload,
// where a reply payload goes and a deadline), hands it to Submit with the
// connection to use, and waits on call.done. The loop queues it, sends it
// as prefix+header+payload with sendmsg (several requests per sendmsg, short
// sends resumed) and receives replies: heads into a small per-connection
// staging buffer, a READ's payload straight into the caller's buffer (only
// the payload bytes that arrive in the same recv as their head are copied
// out of the staging buffer; a connection with READs in flight keeps those
// recvs small). Submissions are batched: one io_uring_enter per loop turn.
// Large READ payloads are received by the ring's kernel workers
// (offload_bytes) so that their copies spread over cores; everything else
// runs on the loop thread. A payload is received in pieces of at most
// payload_piece_bytes, and the loop extends the call's CRC32C over each
// piece as its recv completes, while the bytes are still in cache: the
// caller's check of the whole payload is then a compare, not a second pass
// over memory.
//
// A connection fails as a whole (reset, close, a malformed or unexpected
// reply, or a call past its deadline): every call on it fails with that
// transport error, marked with whether its request had been handed to the
// kernel in full (a server may have applied it) or not (safe to resend
// anywhere). Calls are failed only after the loop's last operation on the
// connection has completed, so no buffer of a finished call is touched again.
// The reply header is returned as received: server errors and payload
// checksums are the caller's to interpret.
//
// Thread-safety: Adopt, Submit and Retire may be called from any thread; a
// DataConnection's accessors too. Everything else runs on the loop thread.
// The destructor REQUIRES that no call is in flight.
#ifndef CKPTFS_CLIENT_URING_DATA_LOOP_H_
#define CKPTFS_CLIENT_URING_DATA_LOOP_H_

#include <liburing.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/tcp.h"
#include "common/unique_fd.h"
#include "proto/data.pb.h"

namespace ckptfs::client {

class DataConnection;

// One request and, once done is notified, its outcome. Owned by the caller,
// who must keep it (and its buffers) alive until done is notified.
struct DataCall {
  // --- Set by the caller before Submit --------------------------------
  uint64_t request_id = 0;  // as serialized in `head`; unique per connection
  std::string head;         // frame prefix + serialized RequestHeader
  const void* payload = nullptr;
  size_t payload_len = 0;
  void* out = nullptr;      // where a reply payload goes (READ)
  size_t out_capacity = 0;  // a larger reply payload is a protocol error
  absl::Time deadline = absl::InfiniteFuture();

  // --- Outcome, valid once done is notified ---------------------------
  // How far the request got when its connection failed.
  enum class Failure {
    kNone,     // a reply came back (reply, payload_received are valid)
    kNotSent,  // not wholly handed to the kernel: the server cannot apply it
    kSent,     // sent in full: the server may apply it (even later)
  };
  absl::Status status;  // OK with a reply; else the transport error (kUnavailable)
  Failure failure = Failure::kNone;
  data::ResponseHeader reply;
  size_t payload_received = 0;  // bytes of reply payload written to out
  // CRC32C of out[0, payload_received), computed by the loop piece by piece
  // as the payload lands (while it is still in cache); the caller compares
  // it with reply.payload_crc32c().
  uint32_t payload_crc32c = 0;
  absl::Notification done;

  // --- Loop-private bookkeeping ---------------------------------------
  DataConnection* conn = nullptr;
  bool sent = false;     // every byte handed to the kernel
  bool replied = false;  // the reply (and its payload) has arrived
};

// A TCP connection to one storage server, carried by a UringDataLoop.
// Shared by the caller's connection registry and the loop; the loop closes
// the socket when the connection fails or, once retired, falls idle.
class DataConnection {
 public:
  DataConnection(const DataConnection&) = delete;
  DataConnection& operator=(const DataConnection&) = delete;

  const HostPort& server() const { return server_; }
  // True once the connection has failed or closed: use another.
  bool dead() const { return dead_.load(std::memory_order_acquire); }
  // Calls submitted on it and not yet finished.
  int load() const { return load_.load(std::memory_order_relaxed); }

 private:
  friend class UringDataLoop;

  // A tag in an SQE's user_data: which operation of which connection.
  enum class OpKind { kRecv, kSend, kRecvPoll, kSendPoll };
  struct OpTag {
    DataConnection* conn;
    OpKind kind;
  };

  DataConnection(UniqueFd fd, HostPort server) : server_(std::move(server)), fd_(std::move(fd)) {}

  const HostPort server_;
  std::atomic<bool> dead_{false};
  std::atomic<int> load_{0};

  // --- Loop thread only -------------------------------------------------
  UniqueFd fd_;
  bool adopted_ = false;
  bool retired_ = false;
  bool finalized_ = false;
  // Failing: the socket is shut down; calls fail once `ops_` reaches 0.
  bool breaking_ = false;
  int break_errno_ = 0;
  std::string break_message_;
  int ops_ = 0;  // operations in the ring for this connection
  bool recv_armed_ = false;
  bool send_armed_ = false;
  bool recv_needs_poll_ = false;  // a recv said -EAGAIN: wait for POLLIN first
  bool send_needs_poll_ = false;
  OpTag recv_tag_{this, OpKind::kRecv};
  OpTag send_tag_{this, OpKind::kSend};
  OpTag recv_poll_tag_{this, OpKind::kRecvPoll};
  OpTag send_poll_tag_{this, OpKind::kSendPoll};

  // Calls accepted and not yet answered, by request_id.
  absl::flat_hash_map<uint64_t, DataCall*> waiting_;
  int reads_waiting_ = 0;  // of those, calls that expect a payload
  // Accepted calls not yet in a send batch, in order.
  std::deque<DataCall*> unsent_;
  // The send batch: iovecs of several calls; iov_call_[i] owns iov_[i].
  std::vector<DataCall*> batch_;
  std::vector<iovec> iov_;
  std::vector<size_t> iov_call_;
  size_t iov_next_ = 0;
  msghdr msg_{};

  // Receiving: frame heads accumulate in stage_[stage_begin_, stage_end_);
  // while payload_call_ is set, recvs go straight into its buffer.
  std::unique_ptr<char[]> stage_;
  size_t stage_begin_ = 0;
  size_t stage_end_ = 0;
  DataCall* payload_call_ = nullptr;
  size_t payload_len_ = 0;
  size_t payload_got_ = 0;
};

class UringDataLoop {
 public:
  struct Options {
    // Submission queue size. Any size works (a full queue is submitted and
    // refilled); each connection has at most two operations in the ring.
    unsigned ring_entries = 64;
    // A READ payload at least this long is received by the ring's kernel
    // workers (IOSQE_ASYNC), which copy several connections' payloads at
    // once on other cores; shorter ones, and all sends, run on the loop
    // thread: offloading long payloads made reads faster for little CPU,
    // offloading sends gained nothing (docs/tuning.md).
    size_t offload_bytes = size_t{256} << 10;
    // Each recv of a READ payload takes at most this many bytes (0: the
    // whole rest of the payload in one recv), and the loop checksums each
    // piece as it lands. Small enough to still be in the cache when the
    // loop reads it; large enough that the extra recvs cost little.
    size_t payload_piece_bytes = size_t{256} << 10;
    // Tests: every recv and send is non-blocking (MSG_DONTWAIT), so the
    // kernel answers -EAGAIN whenever a socket is not ready and the loop
    // must wait for readiness and resubmit.
    bool nonblocking_io_for_testing = false;
  };

  // Starts the loop thread with its ring; fails when io_uring is unavailable.
  static absl::StatusOr<std::unique_ptr<UringDataLoop>> Start(const Options& options);

  UringDataLoop(const UringDataLoop&) = delete;
  UringDataLoop& operator=(const UringDataLoop&) = delete;
  // Fails what is still queued, closes every connection, joins the thread.
  ~UringDataLoop();

  // Hands a connected socket to the loop. REQUIRES: fd is a connected
  // stream socket.
  std::shared_ptr<DataConnection> Adopt(UniqueFd fd, HostPort server);

  // Queues `call` on `conn`; call->done is notified when it finishes. A call
  // on a dead connection fails (kNotSent) at once.
  void Submit(const std::shared_ptr<DataConnection>& conn, DataCall* call);

  // The connection closes once its calls have finished.
  void Retire(const std::shared_ptr<DataConnection>& conn);

  // What the loop has been through, for tests and diagnostics.
  struct Counters {
    std::atomic<uint64_t> recv_again{0};     // recvs answered -EAGAIN, resubmitted
    std::atomic<uint64_t> send_again{0};     // sends answered -EAGAIN, resubmitted
    std::atomic<uint64_t> resumed_sends{0};  // short sends continued
    std::atomic<uint64_t> ring_full{0};      // full submission queue flushed to take more
    std::atomic<uint64_t> most_waiting{0};   // most calls awaiting replies on one connection
    std::atomic<uint64_t> payload_recvs{0};  // recvs that landed READ payload in a caller's buffer
  };
  const Counters& counters() const { return counters_; }

 private:
  enum class CommandKind { kAdopt, kSubmit, kRetire };
  struct Command {
    CommandKind kind;
    std::shared_ptr<DataConnection> conn;
    DataCall* call = nullptr;
  };

  explicit UringDataLoop(const Options& options);
  void Post(Command command);

  // Loop thread.
  void Run();
  void RunCommand(Command& command);
  void Accept(DataConnection& conn, DataCall* call);
  void ArmAll();
  bool Arm(DataConnection& conn);
  bool ArmRecv(DataConnection& conn);
  bool ArmSend(DataConnection& conn);
  void FillBatch(DataConnection& conn);
  io_uring_sqe* GetSqe();
  void Reap();
  void Handle(const io_uring_cqe& cqe);
  void OnRecv(DataConnection& conn, int res);
  void OnSend(DataConnection& conn, int res);
  void ParseStaged(DataConnection& conn);
  void ReplyArrived(DataConnection& conn, DataCall* call);
  void Finish(DataCall* call);
  void Fail(DataConnection& conn, DataCall* call);
  void Break(DataConnection& conn, int err, std::string message);
  void Finalize(DataConnection& conn);
  void ExpireDeadlines();
  void ArmWake();

  const Options options_;
  int base_flags_ = 0;  // MSG_DONTWAIT in the testing mode
  io_uring ring_{};
  bool ring_ready_ = false;
  UniqueFd wake_fd_;  // eventfd: callers write it when the loop sleeps
  std::thread thread_;

  absl::Mutex mu_;
  std::vector<Command> commands_ ABSL_GUARDED_BY(mu_);
  bool sleeping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // --- Loop thread only -------------------------------------------------
  std::vector<std::shared_ptr<DataConnection>> conns_;
  std::multimap<absl::Time, DataCall*> deadlines_;  // of calls awaiting a reply
  uint64_t wake_buf_ = 0;
  bool wake_armed_ = false;
  int wake_tag_ = 0;             // its address tags the eventfd read
  bool arm_incomplete_ = false;  // the ring was full: arm again before sleeping
  bool stop_ = false;
  Counters counters_;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_URING_DATA_LOOP_H_
