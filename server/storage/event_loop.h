// EventLoop: one network thread of the storage server, with its own
// io_uring, serving many connections (connection.h) at once.
//
// Each iteration hands every operation prepared since the last one to the
// kernel with one io_uring_submit_and_wait, then handles the completions.
// A full submission queue is flushed on the spot; if the kernel still takes
// nothing, the connection is queued and resumed next iteration — an
// operation is never dropped. Other threads reach the loop through a
// mailbox (a queue woken by an eventfd read on the ring): new connections,
// requests back from the disk workers, buffers granted by the pool. Once a
// second the loop closes connections that stalled.
//
// One loop of a server also accepts (multishot accept on the listening
// socket) and gives each new socket to the server's `on_accept`, which
// spreads connections over the loops.
//
// Thread-safety: Adopt(), Done(), Granted() and stats() from any thread;
// Start() and Stop() from the thread that owns the loop (not the loop's).
// Everything else is for Connection, on the loop thread.
#ifndef CKPTFS_SERVER_STORAGE_EVENT_LOOP_H_
#define CKPTFS_SERVER_STORAGE_EVENT_LOOP_H_

#include <liburing.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "server/storage/connection.h"
#include "server/storage/disk_workers.h"
#include "server/storage/payload_arena.h"
#include "server/storage/request.h"

namespace ckptfs::storage {

class EventLoop : public RequestSink {
 public:
  struct Options {
    unsigned ring_entries = 256;  // submission queue; the completion queue is twice that
    bool zero_copy_send = false;  // replies with IORING_OP_SENDMSG_ZC
    absl::Duration stall_timeout = absl::Seconds(60);
    size_t max_in_flight = 256;  // unanswered requests per connection
    // Receive and send with MSG_DONTWAIT first: a socket with nothing to do
    // answers EAGAIN at once and the operation is resubmitted to wait for
    // readiness. Costs a round trip per wait; tests use it to drive the
    // EAGAIN path, which io_uring otherwise hides by polling.
    bool nonblocking_sockets = false;
    // The cluster credential every connection must open with (HELLO);
    // empty: connections are served without one.
    std::string credential;
    // Also taken in a HELLO (the cluster's server credential); may be empty.
    std::string server_credential;
  };

  // What the loops of one server share; outlives them.
  struct Shared {
    PayloadArena* pool;
    DiskWorkers* disk;
    std::atomic<size_t>* connections;  // served connections open, all loops
  };

  // Counters for tests and measurements.
  struct Stats {
    uint64_t sq_full = 0;  // times the submission queue was full
    uint64_t zero_copy_sends = 0;
    uint64_t sends = 0;
    uint64_t recvs = 0;
    uint64_t retries = 0;  // receives and sends retried after EAGAIN/EINTR/ENOBUFS
  };

  using AcceptFn = absl::AnyInvocable<void(UniqueFd socket, std::string peer)>;

  static absl::StatusOr<std::unique_ptr<EventLoop>> Create(const Options& options, Shared shared);
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop() override;

  // Makes this loop accept on `listen_fd` (borrowed; open until Stop()
  // returns), handing each socket to `on_accept` on the loop thread.
  // REQUIRES: before Start().
  void AcceptOn(int listen_fd, AcceptFn on_accept);
  void Start();
  // Closes every connection, waits for their requests to come back from
  // the disk workers, and joins the thread. Idempotent.
  void Stop();

  // Serves `socket` on this loop. With a non-OK `refusal` the peer is only
  // told why (an error frame) before it is closed. `served`: counts in
  // Shared::connections (the caller counted it), released when it closes.
  void Adopt(UniqueFd socket, std::string peer, absl::Status refusal, bool served,
             StrangerLimit::Ticket stranger = {});
  void Done(std::unique_ptr<Request> request) override;
  void Granted(Connection* connection, PayloadArena::Lease lease);
  Stats stats() const;

  // For Connection, on the loop thread.
  // A submission queue entry, flushing a full queue first; nullptr if the
  // kernel takes nothing right now (then call RetryLater).
  io_uring_sqe* Sqe();
  void RetryLater(Connection* connection);
  PayloadArena& pool() { return *shared_.pool; }
  DiskWorkers& disk() { return *shared_.disk; }
  const Options& options() const { return options_; }
  bool zero_copy() const { return zero_copy_; }
  void DisableZeroCopy();
  absl::Time now() const { return now_; }
  // Scratch memory for input that is dropped.
  char* sink() { return sink_.get(); }
  static constexpr size_t kSinkSize = 64 * 1024;
  void CountSend(bool zero_copy) {
    (zero_copy ? zero_copy_sends_ : sends_).fetch_add(1, std::memory_order_relaxed);
  }
  void CountRecv() { recvs_.fetch_add(1, std::memory_order_relaxed); }
  void CountRetry() { retries_.fetch_add(1, std::memory_order_relaxed); }

  // user_data tags: the low 3 bits of a CQE's user_data say what completed.
  static constexpr uint64_t kTagRecv = 1;      // Connection*
  static constexpr uint64_t kTagSend = 2;      // Connection*
  static constexpr uint64_t kTagZeroCopy = 3;  // Connection::ZeroCopySend*
  static constexpr uint64_t kTagAccept = 4;
  static constexpr uint64_t kTagWake = 5;
  static constexpr uint64_t kTagMask = 7;

 private:
  struct Message {
    enum class Kind { kAdopt, kDone, kGranted, kStop } kind;
    UniqueFd socket;
    StrangerLimit::Ticket stranger;  // after socket: goes first
    std::string peer;
    absl::Status refusal;
    bool served = false;
    std::unique_ptr<Request> request;
    Connection* connection = nullptr;
    PayloadArena::Lease lease;
  };

  EventLoop(const Options& options, Shared shared) : options_(options), shared_(shared) {}
  void Run();
  // Queues `message` for the loop; false (message dropped) once it stopped.
  bool Post(Message message);
  void HandleMessages();
  void Handle(io_uring_cqe* cqe);
  void OnAccept(int res, uint32_t flags);
  void ArmAccept();
  void ArmWake();
  void Cancel(uint64_t user_data);
  // Destroys `connection` if it is done.
  void Reap(Connection* connection);

  const Options options_;
  const Shared shared_;
  io_uring ring_{};
  bool ring_ready_ = false;
  UniqueFd wake_fd_;
  uint64_t wake_value_ = 0;  // the wake read's target
  std::thread thread_;
  std::unique_ptr<char[]> sink_;
  bool zero_copy_ = false;

  // Loop thread only.
  absl::Time now_;
  std::list<std::unique_ptr<Connection>> connections_;
  std::vector<Connection*> retry_;
  int listen_fd_ = -1;
  AcceptFn on_accept_;
  bool accept_armed_ = false;
  bool wake_armed_ = false;
  bool wake_needed_ = false;  // re-arm the wake read (it could not be submitted)
  absl::Time accept_retry_at_ = absl::InfinitePast();  // backing off until then
  bool stopping_ = false;

  absl::Mutex mu_;  // leaf lock
  std::vector<Message> mailbox_ ABSL_GUARDED_BY(mu_);
  bool wake_written_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;

  std::atomic<uint64_t> sq_full_{0};
  std::atomic<uint64_t> zero_copy_sends_{0};
  std::atomic<uint64_t> sends_{0};
  std::atomic<uint64_t> recvs_{0};
  std::atomic<uint64_t> retries_{0};
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_EVENT_LOOP_H_
