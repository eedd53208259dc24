// See event_loop.h.
#include "server/storage/event_loop.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/tcp.h"

namespace ckptfs::storage {
namespace {

// How often stalled connections are looked for.
constexpr absl::Duration kTick = absl::Seconds(1);
// Out of descriptors or memory while accepting: try again after this.
constexpr absl::Duration kAcceptBackoff = absl::Milliseconds(100);

// TCP keepalive on accepted connections: first probe after this many idle
// seconds, then one every kKeepIntervalS; kKeepCount unanswered probes end
// it. A connection idles without limit between frames, so a client whose
// host died (no FIN, no RST) would otherwise hold its connection forever
// and, over time, fill max_connections.
constexpr int kKeepIdleS = 60;
constexpr int kKeepIntervalS = 10;
constexpr int kKeepCount = 6;

std::string PeerName(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    if (addr.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
      ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
      port = ntohs(in->sin_port);
    } else if (addr.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
      port = ntohs(in6->sin6_port);
    }
  }
  return HostPort{host, port}.ToString();
}

void ConfigureAccepted(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleS, sizeof(kKeepIdleS));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntervalS, sizeof(kKeepIntervalS));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &kKeepCount, sizeof(kKeepCount));
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create(const Options& options,
                                                             Shared shared) {
  std::unique_ptr<EventLoop> loop(new EventLoop(options, shared));
  const unsigned entries = std::max(options.ring_entries, 1u);
  io_uring_params params{};
  // COOP_TASKRUN: completions are run when the loop enters the kernel
  // anyway, instead of interrupting it.
  params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
  params.cq_entries = 2 * entries;
  int rc = io_uring_queue_init_params(entries, &loop->ring_, &params);
  if (rc == -EINVAL) {  // an older kernel without COOP_TASKRUN
    params = io_uring_params();
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = 2 * entries;
    rc = io_uring_queue_init_params(entries, &loop->ring_, &params);
  }
  if (rc < 0) return SyscallError(-rc, "io_uring_queue_init for a network loop");
  loop->ring_ready_ = true;
  loop->wake_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  if (!loop->wake_fd_.valid()) return SyscallError(errno, "eventfd");
  loop->sink_ = std::make_unique<char[]>(kSinkSize);
  loop->zero_copy_ = options.zero_copy_send;
  return loop;
}

EventLoop::~EventLoop() {
  Stop();
  if (ring_ready_) io_uring_queue_exit(&ring_);
}

void EventLoop::AcceptOn(int listen_fd, AcceptFn on_accept) {
  listen_fd_ = listen_fd;
  on_accept_ = std::move(on_accept);
}

void EventLoop::Start() {
  thread_ = std::thread([this] { Run(); });
}

void EventLoop::Stop() {
  if (thread_.joinable()) {
    Message stop{Message::Kind::kStop};
    Post(std::move(stop));
    thread_.join();
  }
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool EventLoop::Post(Message message) {
  bool write = false;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    mailbox_.push_back(std::move(message));
    write = !wake_written_;
    wake_written_ = true;
  }
  if (write) {
    const uint64_t one = 1;
    while (::write(wake_fd_.get(), &one, sizeof(one)) < 0 && errno == EINTR) {
    }
  }
  return true;
}

void EventLoop::Adopt(UniqueFd socket, std::string peer, absl::Status refusal, bool served,
                      StrangerLimit::Ticket stranger) {
  Message message{Message::Kind::kAdopt};
  message.socket = std::move(socket);
  message.stranger = std::move(stranger);
  message.peer = std::move(peer);
  message.refusal = std::move(refusal);
  message.served = served;
  if (!Post(std::move(message)) && served) shared_.connections->fetch_sub(1);
}

void EventLoop::Done(std::unique_ptr<Request> request) {
  Message message{Message::Kind::kDone};
  message.request = std::move(request);
  Post(std::move(message));  // after Stop(): dropped, its lease returned
}

void EventLoop::Granted(Connection* connection, PayloadArena::Lease lease) {
  Message message{Message::Kind::kGranted};
  message.connection = connection;
  message.lease = std::move(lease);
  Post(std::move(message));
}

EventLoop::Stats EventLoop::stats() const {
  Stats stats;
  stats.sq_full = sq_full_.load(std::memory_order_relaxed);
  stats.zero_copy_sends = zero_copy_sends_.load(std::memory_order_relaxed);
  stats.sends = sends_.load(std::memory_order_relaxed);
  stats.recvs = recvs_.load(std::memory_order_relaxed);
  stats.retries = retries_.load(std::memory_order_relaxed);
  return stats;
}

io_uring_sqe* EventLoop::Sqe() {
  if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_); sqe != nullptr) return sqe;
  // The submission queue is full: hand it to the kernel now and take an
  // entry from the emptied queue.
  sq_full_.fetch_add(1, std::memory_order_relaxed);
  const int rc = io_uring_submit(&ring_);
  if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR) {
    CKPTFS_LOG(kWarning) << "io_uring_submit: " << std::strerror(-rc);
  }
  return io_uring_get_sqe(&ring_);
}

void EventLoop::RetryLater(Connection* connection) {
  connection->retry_queued = true;
  retry_.push_back(connection);
}

void EventLoop::DisableZeroCopy() {
  if (!zero_copy_) return;
  zero_copy_ = false;
  CKPTFS_LOG(kWarning) << "zero-copy send not supported here; sending with copies";
}

void EventLoop::ArmAccept() {
  io_uring_sqe* sqe = Sqe();
  if (sqe == nullptr) return;  // next iteration
  io_uring_prep_multishot_accept(sqe, listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  io_uring_sqe_set_data64(sqe, kTagAccept);
  accept_armed_ = true;
}

void EventLoop::ArmWake() {
  io_uring_sqe* sqe = Sqe();
  if (sqe == nullptr) {
    wake_needed_ = true;
    return;
  }
  io_uring_prep_read(sqe, wake_fd_.get(), &wake_value_, sizeof(wake_value_), 0);
  io_uring_sqe_set_data64(sqe, kTagWake);
  wake_armed_ = true;
  wake_needed_ = false;
}

void EventLoop::Cancel(uint64_t user_data) {
  if (io_uring_sqe* sqe = Sqe(); sqe != nullptr) {
    io_uring_prep_cancel64(sqe, user_data, 0);
    io_uring_sqe_set_data64(sqe, 0);
  }
}

void EventLoop::Reap(Connection* connection) {
  if (!connection->Finished()) return;
  if (connection->served()) shared_.connections->fetch_sub(1);
  connections_.erase(connection->self);
}

void EventLoop::HandleMessages() {
  std::vector<Message> messages;
  {
    absl::MutexLock lock(&mu_);
    messages.swap(mailbox_);
    wake_written_ = false;
  }
  for (Message& message : messages) {
    switch (message.kind) {
      case Message::Kind::kAdopt: {
        if (stopping_) {
          if (message.served) shared_.connections->fetch_sub(1);
          break;  // the socket closes with the message
        }
        connections_.push_front(
            std::make_unique<Connection>(std::move(message.socket), std::move(message.peer), *this,
                                         message.served, std::move(message.stranger)));
        Connection* connection = connections_.front().get();
        connection->self = connections_.begin();
        connection->Start(message.refusal);
        Reap(connection);
        break;
      }
      case Message::Kind::kDone: {
        Connection* connection = message.request->connection;
        connection->OnDone(std::move(message.request));
        Reap(connection);
        break;
      }
      case Message::Kind::kGranted:
        message.connection->OnBufferGranted(std::move(message.lease));
        Reap(message.connection);
        break;
      case Message::Kind::kStop: {
        stopping_ = true;
        std::vector<Connection*> all;
        for (auto& connection : connections_) all.push_back(connection.get());
        for (Connection* connection : all) {
          connection->Close("");
          Reap(connection);
        }
        break;
      }
    }
  }
}

void EventLoop::OnAccept(int res, uint32_t flags) {
  if ((flags & IORING_CQE_F_MORE) == 0) accept_armed_ = false;
  if (res >= 0) {
    UniqueFd socket(res);
    if (stopping_) return;
    ConfigureAccepted(socket.get());
    std::string peer = PeerName(socket.get());
    on_accept_(std::move(socket), std::move(peer));
    return;
  }
  if (res == -ECANCELED || stopping_) return;
  switch (-res) {
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
      // Out of descriptors or memory: back off instead of spinning.
      CKPTFS_LOG(kWarning) << "accept: " << std::strerror(-res);
      if (accept_armed_) Cancel(kTagAccept);
      accept_retry_at_ = now_ + kAcceptBackoff;
      break;
    case EINVAL:
    case EBADF:
      listen_fd_ = -1;  // the listener is gone
      break;
    default:  // ECONNABORTED, EINTR, ...: the next one may be fine
      break;
  }
}

void EventLoop::Handle(io_uring_cqe* cqe) {
  const uint64_t data = io_uring_cqe_get_data64(cqe);
  if (data == 0) return;  // a cancellation's own completion
  const uint64_t tag = data & kTagMask;
  const uint64_t pointer = data & ~kTagMask;
  switch (tag) {
    case kTagRecv: {
      auto* connection = reinterpret_cast<Connection*>(pointer);
      connection->OnRecv(cqe->res);
      Reap(connection);
      break;
    }
    case kTagSend: {
      auto* connection = reinterpret_cast<Connection*>(pointer);
      connection->OnSend(cqe->res, cqe->flags, nullptr);
      Reap(connection);
      break;
    }
    case kTagZeroCopy: {
      auto* send = reinterpret_cast<Connection::ZeroCopySend*>(pointer);
      Connection* connection = send->connection;
      connection->OnSend(cqe->res, cqe->flags, send);
      Reap(connection);
      break;
    }
    case kTagAccept:
      OnAccept(cqe->res, cqe->flags);
      break;
    case kTagWake:
      wake_armed_ = false;
      wake_needed_ = true;  // re-armed at the top of the loop
      break;
    default:
      CKPTFS_LOG(kError) << "completion with unknown tag " << tag;
      break;
  }
}

void EventLoop::Run() {
  now_ = absl::Now();
  absl::Time next_tick = now_ + kTick;
  wake_needed_ = true;
  bool final_cancels_sent = false;
  for (;;) {
    HandleMessages();
    std::vector<Connection*> retry;
    retry.swap(retry_);
    for (Connection* connection : retry) {
      connection->Resume();
      Reap(connection);
    }
    const bool done = stopping_ && connections_.empty();
    if (done) {
      // Nothing can need the loop any more: end its own operations.
      if (!final_cancels_sent) {
        if (accept_armed_) Cancel(kTagAccept);
        if (wake_armed_) Cancel(kTagWake);
        final_cancels_sent = true;
      }
      if (!accept_armed_ && !wake_armed_) break;
    } else {
      if (wake_needed_ && !wake_armed_) ArmWake();
      if (listen_fd_ >= 0 && !stopping_ && !accept_armed_ && now_ >= accept_retry_at_) {
        ArmAccept();
      }
    }
    absl::Time deadline = next_tick;
    if (listen_fd_ >= 0 && !accept_armed_ && accept_retry_at_ > now_) {
      deadline = std::min(deadline, accept_retry_at_);
    }
    const int64_t wait_ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(deadline - now_));
    __kernel_timespec ts{wait_ns / 1000000000, wait_ns % 1000000000};
    io_uring_cqe* first = nullptr;
    const int rc = io_uring_submit_and_wait_timeout(&ring_, &first, 1, &ts, nullptr);
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      CKPTFS_LOG(kError) << "io_uring wait: " << std::strerror(-rc);
    }
    now_ = absl::Now();
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      Handle(cqe);
    }
    io_uring_cq_advance(&ring_, seen);
    if (now_ >= next_tick) {
      std::vector<Connection*> all;
      for (auto& connection : connections_) all.push_back(connection.get());
      for (Connection* connection : all) {
        connection->Tick(now_);
        Reap(connection);
      }
      next_tick = now_ + kTick;
    }
  }
  std::vector<Message> left;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    left.swap(mailbox_);
  }
  for (Message& message : left) {
    if (message.kind == Message::Kind::kAdopt && message.served) {
      shared_.connections->fetch_sub(1);
    }
  }
}

}  // namespace ckptfs::storage
