// See uring_data_loop.h. One turn of the loop: take the queued commands,
// arm every connection's recv and send (and the wake-up read), submit them
// all and wait for a completion or the earliest deadline, then handle every
// completion. Handlers never touch the submission queue; only the arming
// step does, so a full queue is simply submitted and refilled there.
#include "client/uring_data_loop.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/log.h"

namespace ckptfs::client {
namespace {

// A connection's staging buffer for reply heads: room for a whole frame head
// (prefix + largest header) and then some, so that many small replies
// (WRITE, TRIM, SYNC) arrive in one recv.
constexpr size_t kStageCapacity = 64 * 1024;
static_assert(kStageCapacity >= kFramePrefixSize + kMaxFrameHeader, "stage holds a frame head");
// While a connection has READs in flight its staging recvs are this small:
// payload bytes that arrive behind a head are copied out of the stage, and
// this bounds that copy to a few hundred bytes per payload.
constexpr size_t kSmallStageRecv = 512;
// A send batch: at most this many iovecs (two per request), and no request
// is added once it holds this many bytes (a call counts as sent only when
// the batch's sendmsg completes; a long batch would hold answered calls).
constexpr size_t kMaxBatchIov = 64;
constexpr size_t kMaxBatchBytes = size_t{1} << 20;

bool Transient(int res) { return res == -EINTR || res == -EAGAIN || res == -EBUSY; }

}  // namespace

absl::StatusOr<std::unique_ptr<UringDataLoop>> UringDataLoop::Start(const Options& options) {
  std::unique_ptr<UringDataLoop> loop(new UringDataLoop(options));
  const int efd = ::eventfd(0, EFD_CLOEXEC);
  if (efd < 0) return SyscallError(errno, "eventfd for the data loop");
  loop->wake_fd_.Reset(efd);
  // The ring is made on the loop thread: with SINGLE_ISSUER only its
  // creator may submit, and DEFER_TASKRUN runs completions when that thread
  // waits, which batches them.
  absl::Notification ready;
  absl::Status init;
  UringDataLoop* self = loop.get();
  loop->thread_ = std::thread([self, &ready, &init] {
    ::pthread_setname_np(::pthread_self(), "ckptfs-data");
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    const unsigned entries = std::max(1u, self->options_.ring_entries);
    int rc = io_uring_queue_init_params(entries, &self->ring_, &params);
    if (rc == -EINVAL) {  // an older kernel: no such flags
      params = io_uring_params{};
      rc = io_uring_queue_init_params(entries, &self->ring_, &params);
    }
    if (rc < 0) {
      init = SyscallError(-rc, "io_uring_queue_init for the data loop");
      ready.Notify();
      return;
    }
    self->ring_ready_ = true;
    ready.Notify();
    self->Run();
  });
  ready.WaitForNotification();
  if (!init.ok()) {
    loop->thread_.join();
    return init;
  }
  return loop;
}

UringDataLoop::UringDataLoop(const Options& options)
    : options_(options), base_flags_(options.nonblocking_io_for_testing ? MSG_DONTWAIT : 0) {}

UringDataLoop::~UringDataLoop() {
  if (thread_.joinable()) {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    ::eventfd_write(wake_fd_.get(), 1);
    thread_.join();
  }
  if (ring_ready_) io_uring_queue_exit(&ring_);
}

std::shared_ptr<DataConnection> UringDataLoop::Adopt(UniqueFd fd, HostPort server) {
  std::shared_ptr<DataConnection> conn(new DataConnection(std::move(fd), std::move(server)));
  conn->stage_ = std::make_unique<char[]>(kStageCapacity);
  Post({CommandKind::kAdopt, conn, nullptr});
  return conn;
}

void UringDataLoop::Submit(const std::shared_ptr<DataConnection>& conn, DataCall* call) {
  conn->load_.fetch_add(1, std::memory_order_relaxed);
  Post({CommandKind::kSubmit, conn, call});
}

void UringDataLoop::Retire(const std::shared_ptr<DataConnection>& conn) {
  Post({CommandKind::kRetire, conn, nullptr});
}

void UringDataLoop::Post(Command command) {
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    commands_.push_back(std::move(command));
    wake = std::exchange(sleeping_, false);
  }
  if (wake) ::eventfd_write(wake_fd_.get(), 1);
}

void UringDataLoop::Run() {
  std::vector<Command> commands;
  while (true) {
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      commands.swap(commands_);
      stopping = stopping_;
      sleeping_ = commands.empty();
    }
    if (stopping && !stop_) {
      stop_ = true;
      for (auto& conn : conns_) Break(*conn, ECANCELED, "the client is shutting down");
      // Completes the wake-up read so that nothing of ours is left in the ring.
      ::eventfd_write(wake_fd_.get(), 1);
    }
    for (Command& command : commands) RunCommand(command);
    const bool had_commands = !commands.empty();
    commands.clear();
    ArmAll();
    if (stop_ && conns_.empty() && !wake_armed_) return;

    int rc = 0;
    if (had_commands || arm_incomplete_) {
      rc = io_uring_submit_and_get_events(&ring_);
    } else {
      io_uring_cqe* cqe = nullptr;
      if (deadlines_.empty()) {
        rc = io_uring_submit_and_wait(&ring_, 1);
      } else {
        const absl::Duration left =
            std::max(absl::ZeroDuration(), deadlines_.begin()->first - absl::Now());
        __kernel_timespec ts{};
        ts.tv_sec = absl::ToInt64Seconds(left);
        ts.tv_nsec = absl::ToInt64Nanoseconds(left - absl::Seconds(ts.tv_sec));
        rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
      }
    }
    if (rc < 0 && rc != -ETIME && !Transient(rc)) {
      // Operations in the ring point at callers' buffers: going on without
      // the ring, or returning, would leave them to be written later.
      CKPTFS_LOG(kError) << "data loop: io_uring_enter failed: " << std::strerror(-rc);
      std::abort();
    }
    Reap();
    ExpireDeadlines();
  }
}

void UringDataLoop::RunCommand(Command& command) {
  DataConnection& conn = *command.conn;
  switch (command.kind) {
    case CommandKind::kAdopt:
      conn.adopted_ = true;
      if (stop_) Break(conn, ECANCELED, "the client is shutting down");
      conns_.push_back(std::move(command.conn));
      break;
    case CommandKind::kSubmit:
      Accept(conn, command.call);
      break;
    case CommandKind::kRetire:
      conn.retired_ = true;
      break;
  }
}

void UringDataLoop::Accept(DataConnection& conn, DataCall* call) {
  call->conn = &conn;
  if (!conn.adopted_ || conn.breaking_ || conn.finalized_) {
    call->status = ErrnoStatusWithCode(
        absl::StatusCode::kUnavailable, conn.break_errno_ != 0 ? conn.break_errno_ : EIO,
        absl::StrCat("storage server ", conn.server_.ToString(), ": connection already closed"));
    call->failure = DataCall::Failure::kNotSent;
    conn.load_.fetch_sub(1, std::memory_order_relaxed);
    call->done.Notify();
    return;
  }
  conn.waiting_.emplace(call->request_id, call);
  if (conn.waiting_.size() > counters_.most_waiting.load(std::memory_order_relaxed)) {
    counters_.most_waiting.store(conn.waiting_.size(), std::memory_order_relaxed);
  }
  if (call->out_capacity > 0) ++conn.reads_waiting_;
  deadlines_.emplace(call->deadline, call);
  conn.unsent_.push_back(call);
}

void UringDataLoop::ArmAll() {
  arm_incomplete_ = false;
  if (!wake_armed_ && !stop_) {
    if (io_uring_sqe* sqe = GetSqe()) {
      io_uring_prep_read(sqe, wake_fd_.get(), &wake_buf_, sizeof(wake_buf_), 0);
      io_uring_sqe_set_data(sqe, &wake_tag_);
      wake_armed_ = true;
    }
  }
  for (auto& conn : conns_) {
    if (!Arm(*conn)) break;  // the ring is full and cannot take more now
  }
  conns_.erase(
      std::remove_if(conns_.begin(), conns_.end(),
                     [](const std::shared_ptr<DataConnection>& c) { return c->finalized_; }),
      conns_.end());
}

bool UringDataLoop::Arm(DataConnection& conn) {
  if (conn.finalized_) return true;
  if (!conn.breaking_ && conn.retired_ && conn.waiting_.empty() &&
      conn.iov_next_ == conn.iov_.size()) {
    Break(conn, ECONNABORTED, "connection retired");
  }
  if (conn.breaking_) {
    if (conn.ops_ == 0) Finalize(conn);
    return true;
  }
  return ArmRecv(conn) && ArmSend(conn);
}

bool UringDataLoop::ArmRecv(DataConnection& conn) {
  if (conn.recv_armed_) return true;
  io_uring_sqe* sqe = GetSqe();
  if (sqe == nullptr) return false;
  const int wait_all = options_.nonblocking_io_for_testing ? 0 : MSG_WAITALL;
  if (conn.recv_needs_poll_) {
    io_uring_prep_poll_add(sqe, conn.fd_.get(), POLLIN);
    io_uring_sqe_set_data(sqe, &conn.recv_poll_tag_);
  } else if (conn.payload_call_ != nullptr) {
    char* out = static_cast<char*>(conn.payload_call_->out) + conn.payload_got_;
    size_t want = conn.payload_len_ - conn.payload_got_;
    if (options_.payload_piece_bytes > 0) want = std::min(want, options_.payload_piece_bytes);
    io_uring_prep_recv(sqe, conn.fd_.get(), out, want, base_flags_ | wait_all);
    io_uring_sqe_set_data(sqe, &conn.recv_tag_);
    if (want >= options_.offload_bytes) {
      io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
    }
  } else {
    if (conn.stage_begin_ > 0) {
      std::memmove(conn.stage_.get(), conn.stage_.get() + conn.stage_begin_,
                   conn.stage_end_ - conn.stage_begin_);
      conn.stage_end_ -= conn.stage_begin_;
      conn.stage_begin_ = 0;
    }
    size_t want = kStageCapacity - conn.stage_end_;
    if (conn.reads_waiting_ > 0) want = std::min(want, kSmallStageRecv);
    io_uring_prep_recv(sqe, conn.fd_.get(), conn.stage_.get() + conn.stage_end_, want, base_flags_);
    io_uring_sqe_set_data(sqe, &conn.recv_tag_);
  }
  conn.recv_armed_ = true;
  ++conn.ops_;
  return true;
}

bool UringDataLoop::ArmSend(DataConnection& conn) {
  if (conn.send_armed_) return true;
  if (conn.iov_next_ == conn.iov_.size()) {
    FillBatch(conn);
    if (conn.iov_.empty()) return true;
  }
  io_uring_sqe* sqe = GetSqe();
  if (sqe == nullptr) return false;
  if (conn.send_needs_poll_) {
    io_uring_prep_poll_add(sqe, conn.fd_.get(), POLLOUT);
    io_uring_sqe_set_data(sqe, &conn.send_poll_tag_);
  } else {
    conn.msg_ = msghdr{};
    conn.msg_.msg_iov = conn.iov_.data() + conn.iov_next_;
    conn.msg_.msg_iovlen = std::min<size_t>(conn.iov_.size() - conn.iov_next_, IOV_MAX);
    const int wait_all = options_.nonblocking_io_for_testing ? 0 : MSG_WAITALL;
    io_uring_prep_sendmsg(sqe, conn.fd_.get(), &conn.msg_, base_flags_ | wait_all | MSG_NOSIGNAL);
    io_uring_sqe_set_data(sqe, &conn.send_tag_);
  }
  conn.send_armed_ = true;
  ++conn.ops_;
  return true;
}

void UringDataLoop::FillBatch(DataConnection& conn) {
  conn.batch_.clear();
  conn.iov_.clear();
  conn.iov_call_.clear();
  conn.iov_next_ = 0;
  size_t bytes = 0;
  while (!conn.unsent_.empty() && conn.iov_.size() + 2 <= kMaxBatchIov && bytes < kMaxBatchBytes) {
    DataCall* call = conn.unsent_.front();
    conn.unsent_.pop_front();
    const size_t index = conn.batch_.size();
    conn.batch_.push_back(call);
    conn.iov_.push_back({call->head.data(), call->head.size()});
    conn.iov_call_.push_back(index);
    bytes += call->head.size();
    if (call->payload_len > 0) {
      conn.iov_.push_back({const_cast<void*>(call->payload), call->payload_len});
      conn.iov_call_.push_back(index);
      bytes += call->payload_len;
    }
  }
}

io_uring_sqe* UringDataLoop::GetSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe != nullptr) return sqe;
  // The submission queue is full: hand it to the kernel and take a slot.
  counters_.ring_full.fetch_add(1, std::memory_order_relaxed);
  const int rc = io_uring_submit(&ring_);
  if (rc < 0 && !Transient(rc)) {
    CKPTFS_LOG(kError) << "data loop: io_uring_submit failed: " << std::strerror(-rc);
    std::abort();
  }
  sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) arm_incomplete_ = true;  // reap first, then arm the rest
  return sqe;
}

void UringDataLoop::Reap() {
  io_uring_cqe* cqe = nullptr;
  unsigned head = 0;
  unsigned seen = 0;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    Handle(*cqe);
    ++seen;
  }
  io_uring_cq_advance(&ring_, seen);
}

void UringDataLoop::Handle(const io_uring_cqe& cqe) {
  void* data = io_uring_cqe_get_data(&cqe);
  if (data == &wake_tag_) {
    wake_armed_ = false;
    return;
  }
  auto* tag = static_cast<DataConnection::OpTag*>(data);
  DataConnection& conn = *tag->conn;
  --conn.ops_;
  switch (tag->kind) {
    case DataConnection::OpKind::kRecv:
      conn.recv_armed_ = false;
      OnRecv(conn, cqe.res);
      break;
    case DataConnection::OpKind::kSend:
      conn.send_armed_ = false;
      OnSend(conn, cqe.res);
      break;
    case DataConnection::OpKind::kRecvPoll:
    case DataConnection::OpKind::kSendPoll: {
      const bool recv = tag->kind == DataConnection::OpKind::kRecvPoll;
      (recv ? conn.recv_armed_ : conn.send_armed_) = false;
      (recv ? conn.recv_needs_poll_ : conn.send_needs_poll_) = false;
      if (cqe.res < 0 && !Transient(cqe.res) && !conn.breaking_) {
        Break(conn, -cqe.res, absl::StrCat("poll: ", std::strerror(-cqe.res)));
      }
      break;
    }
  }
}

void UringDataLoop::OnRecv(DataConnection& conn, int res) {
  if (conn.breaking_) return;  // the socket is shut down; what came is moot
  if (res == -EAGAIN) {
    counters_.recv_again.fetch_add(1, std::memory_order_relaxed);
    conn.recv_needs_poll_ = true;
    return;
  }
  if (res == -EINTR || res == -ENOBUFS) return;  // armed again next turn
  if (res < 0) {
    Break(conn, -res, absl::StrCat("recv: ", std::strerror(-res)));
    return;
  }
  if (res == 0) {
    const bool mid_frame = conn.payload_call_ != nullptr || conn.stage_end_ > conn.stage_begin_;
    Break(conn, ECONNRESET,
          mid_frame ? "connection closed inside a frame" : "connection closed by the server");
    return;
  }
  if (DataCall* call = conn.payload_call_) {
    counters_.payload_recvs.fetch_add(1, std::memory_order_relaxed);
    // Checksummed now, while the piece just received is in cache.
    call->payload_crc32c =
        Crc32cExtend(call->payload_crc32c, static_cast<const char*>(call->out) + conn.payload_got_,
                     static_cast<size_t>(res));
    conn.payload_got_ += static_cast<size_t>(res);
    if (conn.payload_got_ == conn.payload_len_) {
      conn.payload_call_ = nullptr;
      call->payload_received = conn.payload_len_;
      ReplyArrived(conn, call);
    }
    return;
  }
  conn.stage_end_ += static_cast<size_t>(res);
  ParseStaged(conn);
}

void UringDataLoop::ParseStaged(DataConnection& conn) {
  char* const stage = conn.stage_.get();
  while (!conn.breaking_) {
    const size_t avail = conn.stage_end_ - conn.stage_begin_;
    if (avail < kFramePrefixSize) break;
    auto prefix = DecodeFramePrefix(absl::string_view(stage + conn.stage_begin_, kFramePrefixSize));
    if (!prefix.ok()) {
      Break(conn, ErrnoFromStatus(prefix.status()), std::string(prefix.status().message()));
      return;
    }
    const size_t head = kFramePrefixSize + prefix->header_len;
    if (avail < head) break;
    data::ResponseHeader header;
    if (!header.ParseFromArray(stage + conn.stage_begin_ + kFramePrefixSize,
                               static_cast<int>(prefix->header_len))) {
      Break(conn, EBADMSG, "reply header is not a valid protobuf message");
      return;
    }
    conn.stage_begin_ += head;
    if (header.request_id() == 0) {
      // The server refuses the connection itself (over its limit, or it
      // could not parse what it got) and closes it: keep its errno.
      Break(conn, header.error() != 0 ? header.error() : EBADMSG,
            header.error() != 0 ? header.message() : "reply without a request id");
      return;
    }
    auto it = conn.waiting_.find(header.request_id());
    if (it == conn.waiting_.end()) {
      Break(conn, EBADMSG,
            absl::StrCat("reply for request ", header.request_id(), ", which is not in flight"));
      return;
    }
    DataCall* call = it->second;
    if (prefix->payload_len > call->out_capacity) {
      Break(conn, EBADMSG,
            absl::StrCat("reply payload of ", prefix->payload_len, " bytes exceeds the ",
                         call->out_capacity, " asked for"));
      return;
    }
    call->reply = std::move(header);
    const size_t payload = prefix->payload_len;
    const size_t staged = std::min(conn.stage_end_ - conn.stage_begin_, payload);
    call->payload_crc32c = 0;
    if (staged > 0) {
      std::memcpy(call->out, stage + conn.stage_begin_, staged);
      call->payload_crc32c = Crc32c(call->out, staged);
    }
    conn.stage_begin_ += staged;
    if (staged < payload) {
      conn.payload_call_ = call;  // the rest lands straight in call->out
      conn.payload_len_ = payload;
      conn.payload_got_ = staged;
      break;
    }
    call->payload_received = payload;
    ReplyArrived(conn, call);
  }
  if (conn.stage_begin_ == conn.stage_end_) conn.stage_begin_ = conn.stage_end_ = 0;
}

void UringDataLoop::ReplyArrived(DataConnection& conn, DataCall* call) {
  conn.waiting_.erase(call->request_id);
  if (call->out_capacity > 0) --conn.reads_waiting_;
  auto [first, last] = deadlines_.equal_range(call->deadline);
  for (auto it = first; it != last; ++it) {
    if (it->second == call) {
      deadlines_.erase(it);
      break;
    }
  }
  call->replied = true;
  // A reply can overtake our own record of the send (the server answers
  // before the send completion is reaped): the payload is still in use.
  if (call->sent) Finish(call);
}

void UringDataLoop::Finish(DataCall* call) {
  DataConnection* conn = call->conn;
  call->status = absl::OkStatus();
  call->failure = DataCall::Failure::kNone;
  conn->load_.fetch_sub(1, std::memory_order_relaxed);
  call->done.Notify();  // the caller may free `call` from here on
}

void UringDataLoop::OnSend(DataConnection& conn, int res) {
  if (res == -EAGAIN) {
    counters_.send_again.fetch_add(1, std::memory_order_relaxed);
    if (!conn.breaking_) conn.send_needs_poll_ = true;
    return;
  }
  if (res == -EINTR || res == -ENOBUFS) return;
  if (res < 0) {
    if (!conn.breaking_) Break(conn, -res, absl::StrCat("send: ", std::strerror(-res)));
    return;
  }
  if (res == 0) {
    if (!conn.breaking_) Break(conn, EIO, "send made no progress");
    return;
  }
  // Bytes the kernel took count even on a failing connection: they decide
  // whether each call was sent in full.
  size_t left = static_cast<size_t>(res);
  while (left > 0 && conn.iov_next_ < conn.iov_.size()) {
    iovec& v = conn.iov_[conn.iov_next_];
    const size_t n = std::min(left, v.iov_len);
    v.iov_base = static_cast<char*>(v.iov_base) + n;
    v.iov_len -= n;
    left -= n;
    if (v.iov_len > 0) break;
    const size_t index = conn.iov_call_[conn.iov_next_];
    ++conn.iov_next_;
    const bool call_done =
        conn.iov_next_ == conn.iov_.size() || conn.iov_call_[conn.iov_next_] != index;
    if (call_done) {
      DataCall* call = conn.batch_[index];
      call->sent = true;
      if (call->replied) Finish(call);
    }
  }
  if (conn.iov_next_ < conn.iov_.size() && !conn.breaking_) {
    counters_.resumed_sends.fetch_add(1, std::memory_order_relaxed);  // the rest goes next turn
  }
}

void UringDataLoop::Break(DataConnection& conn, int err, std::string message) {
  if (conn.breaking_ || conn.finalized_) return;
  conn.breaking_ = true;
  conn.dead_.store(true, std::memory_order_release);
  conn.break_errno_ = err > 0 ? err : EIO;
  conn.break_message_ = std::move(message);
  // Completes this connection's recv, send and polls in the ring; its calls
  // fail once they have (Finalize).
  if (conn.fd_.valid()) ::shutdown(conn.fd_.get(), SHUT_RDWR);
}

void UringDataLoop::Fail(DataConnection& conn, DataCall* call) {
  call->status = ErrnoStatusWithCode(
      absl::StatusCode::kUnavailable, conn.break_errno_,
      absl::StrCat("storage server ", conn.server_.ToString(), ": ", conn.break_message_));
  call->failure = call->sent ? DataCall::Failure::kSent : DataCall::Failure::kNotSent;
  conn.load_.fetch_sub(1, std::memory_order_relaxed);
  call->done.Notify();
}

void UringDataLoop::Finalize(DataConnection& conn) {
  conn.finalized_ = true;
  // Calls answered while their request was still being sent: the send is
  // over now (the connection is down), so they finish with their reply.
  size_t last = SIZE_MAX;
  for (size_t i = conn.iov_next_; i < conn.iov_.size(); ++i) {
    const size_t index = conn.iov_call_[i];
    if (index == last) continue;
    last = index;
    DataCall* call = conn.batch_[index];
    if (call->replied) Finish(call);
  }
  for (auto& [id, call] : conn.waiting_) {
    auto [first, end] = deadlines_.equal_range(call->deadline);
    for (auto it = first; it != end; ++it) {
      if (it->second == call) {
        deadlines_.erase(it);
        break;
      }
    }
    Fail(conn, call);
  }
  conn.waiting_.clear();
  conn.reads_waiting_ = 0;
  conn.unsent_.clear();
  conn.batch_.clear();
  conn.iov_.clear();
  conn.iov_call_.clear();
  conn.iov_next_ = 0;
  conn.payload_call_ = nullptr;
  conn.fd_.Reset();
}

void UringDataLoop::ExpireDeadlines() {
  if (deadlines_.empty()) return;
  const absl::Time now = absl::Now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    DataCall* call = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    // The reply may still come, and other requests on this connection are
    // queued behind it: the connection goes, and every call on it fails.
    Break(*call->conn, ETIMEDOUT, "no reply within the data timeout");
  }
}

}  // namespace ckptfs::client
