// See connection.h.
#include "server/storage/connection.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/log_limiter.h"
#include "common/metrics/metrics.h"
#include "server/storage/event_loop.h"

namespace ckptfs::storage {
namespace {

// How long a connection may stay open without presenting the credential
// (when the server wants one).
constexpr absl::Duration kHelloTimeout = absl::Seconds(3);

// Refusals a peer can cause at will share one limiter: one line a second.
LogLimiter& RefusalLog() {
  static LogLimiter* limiter = new LogLimiter(absl::Seconds(1));
  return *limiter;
}

// Lingering close after a protocol error: at most a frame's worth of input,
// for at most this long.
constexpr absl::Duration kLingerTimeout = absl::Seconds(2);
constexpr size_t kLingerBytes = kFramePrefixSize + kMaxFrameHeader + kMaxFramePayload;
// iovecs in one send (two per reply: head and payload).
constexpr size_t kMaxIov = 64;
// Sends smaller than this are copied (plain sendmsg) even with zero-copy
// on: pinning pages and waiting for a notification costs more.
constexpr size_t kMinZeroCopyBytes = 64 * 1024;
// A header buffer grown past this by a large frame header is given back.
constexpr size_t kKeepHeaderBytes = 1024;

bool Transient(int res) { return res == -EAGAIN || res == -EINTR || res == -ENOBUFS; }

// The frame prefix and serialized header of a reply carrying `payload_len`
// payload bytes.
std::string ReplyHead(data::ResponseHeader header, size_t payload_len) {
  if (header.ByteSizeLong() > kMaxFrameHeader) {
    header.mutable_message()->resize(kMaxFrameHeader / 2);  // an overlong error message
  }
  std::string head(kFramePrefixSize, '\0');
  header.AppendToString(&head);
  EncodeFramePrefix(
      {static_cast<uint32_t>(head.size() - kFramePrefixSize), static_cast<uint32_t>(payload_len)},
      head.data());
  return head;
}

}  // namespace

Connection::Connection(UniqueFd socket, std::string peer, EventLoop& loop, bool served,
                       StrangerLimit::Ticket stranger)
    : socket_(std::move(socket)),
      stranger_(std::move(stranger)),
      peer_(std::move(peer)),
      loop_(loop),
      served_(served),
      authenticated_(loop.options().credential.empty()) {}

Connection::~Connection() {
  // Requests still held by zero-copy sends are gone with their notifications.
  zero_copy_held_.clear();
}

void Connection::Start(const absl::Status& refusal) {
  if (!refusal.ok()) {
    if (std::string held_back; RefusalLog().Allow(&held_back)) {
      CKPTFS_LOG(kWarning) << "refusing a connection from " << peer_ << ": " << refusal.message()
                           << held_back;
    }
    Fail(refusal);
    return;
  }
  StartRecv();
}

void Connection::RetryLater() {
  if (!retry_queued) loop_.RetryLater(this);
}

void Connection::Resume() {
  retry_queued = false;
  StartRecv();
  StartSend();
}

void Connection::StartRecv() {
  if (closed_ || recv_pending_) return;
  char* buffer = nullptr;
  size_t length = 0;
  switch (phase_) {
    case Phase::kPrefix:
      buffer = prefix_ + got_;
      length = kFramePrefixSize - got_;
      break;
    case Phase::kHeader:
      buffer = header_bytes_.data() + got_;
      length = header_bytes_.size() - got_;
      break;
    case Phase::kPayload:
      buffer = request_->payload.data() + got_;
      length = frame_.payload_len - got_;
      break;
    case Phase::kDiscard:
    case Phase::kLinger:
      buffer = loop_.sink();
      length = std::min(discard_left_, EventLoop::kSinkSize);
      break;
    default:
      return;  // not reading now
  }
  io_uring_sqe* sqe = loop_.Sqe();
  if (sqe == nullptr) {
    RetryLater();
    return;
  }
  const bool dont_wait = loop_.options().nonblocking_sockets && !recv_poll_first_;
  io_uring_prep_recv(sqe, socket_.get(), buffer, length, dont_wait ? MSG_DONTWAIT : 0);
  if (recv_poll_first_) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;  // wait, don't spin
  io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(this) | EventLoop::kTagRecv);
  recv_pending_ = true;
  loop_.CountRecv();
}

void Connection::OnRecv(int res) {
  recv_pending_ = false;
  recv_poll_first_ = res == -EAGAIN;
  if (closed_) {
    request_.reset();  // the buffer it was receiving into is free now
    return;
  }
  if (res < 0) {
    if (Transient(res)) {
      loop_.CountRetry();
      StartRecv();
      return;
    }
    const bool idle = phase_ == Phase::kLinger || (phase_ == Phase::kPrefix && got_ == 0);
    Close(idle ? "" : absl::StrCat("receive failed inside a frame: ", std::strerror(-res)));
    return;
  }
  if (res == 0) {
    const bool idle = phase_ == Phase::kLinger || (phase_ == Phase::kPrefix && got_ == 0);
    Close(idle ? "" : "closed by the peer inside a frame");
    return;
  }
  last_recv_ = loop_.now();
  OnFrameBytes(static_cast<size_t>(res));
}

void Connection::OnFrameBytes(size_t n) {
  switch (phase_) {
    case Phase::kLinger:
      discard_left_ -= std::min(n, discard_left_);
      if (discard_left_ == 0) {
        Close("");
        return;
      }
      break;
    case Phase::kDiscard:
      discard_left_ -= std::min(n, discard_left_);
      if (discard_left_ == 0) {
        Dispatch();
        return;
      }
      break;
    case Phase::kPrefix:
      got_ += n;
      if (got_ == kFramePrefixSize) {
        OnPrefix();
        return;
      }
      break;
    case Phase::kHeader:
      got_ += n;
      if (got_ == header_bytes_.size()) {
        OnHeader();
        return;
      }
      break;
    case Phase::kPayload:
      got_ += n;
      if (got_ == frame_.payload_len) {
        request_->payload.set_size(frame_.payload_len);
        Dispatch();
        return;
      }
      break;
    default:
      return;
  }
  StartRecv();
}

void Connection::OnPrefix() {
  auto prefix = DecodeFramePrefix(absl::string_view(prefix_, sizeof(prefix_)));
  if (!prefix.ok()) {
    Fail(prefix.status());
    return;
  }
  frame_ = *prefix;
  header_bytes_.resize(frame_.header_len);
  got_ = 0;
  phase_ = Phase::kHeader;
  StartRecv();
}

void Connection::OnHeader() {
  auto request = std::make_unique<Request>();
  if (!request->header.ParseFromString(header_bytes_)) {
    Fail(ErrnoStatus(EBADMSG, absl::StrCat("frame header of ", header_bytes_.size(),
                                           " bytes is not a valid RequestHeader protobuf")));
    return;
  }
  if (header_bytes_.capacity() > kKeepHeaderBytes) std::string().swap(header_bytes_);
  if (request->header.op() == data::HELLO) {
    // Once per connection: a HELLO's reply is not counted in flight, so a
    // stream of them would queue replies without bound.
    if (hello_seen_) {
      Fail(ErrnoStatus(EPROTO,
                       "a second HELLO on one connection (HELLO opens a connection, "
                       "once)"));
      return;
    }
    hello_seen_ = true;
  }
  if ((!authenticated_ || request->header.op() == data::HELLO) && !Authenticate(request->header)) {
    return;
  }
  request_ = std::move(request);
  // One lease per request: the payload (a WRITE's; other ops drop theirs)
  // then a READ's chunk buffer.
  const data::Op op = request_->header.op();
  const size_t payload_part = op == data::WRITE ? RoundUpToBlock(frame_.payload_len) : 0;
  const size_t read_part = op == data::READ ? ReadBufferSize(request_->header) : 0;
  if (payload_part + read_part == 0) {
    AfterBuffer();
    return;
  }
  phase_ = Phase::kWaitBuffer;
  auto [lease, ticket] = loop_.pool().TakeOrWait(
      payload_part + read_part, [loop = &loop_, self = this](PayloadArena::Lease granted) {
        loop->Granted(self, std::move(granted));
      });
  if (!lease.has_value()) {
    ticket_ = ticket;  // backpressure: read nothing more until it is granted
    return;
  }
  UseLease(*std::move(lease));
  AfterBuffer();
}

void Connection::OnBufferGranted(PayloadArena::Lease lease) {
  grant_pending_ = false;
  ticket_ = 0;
  if (closed_ || phase_ != Phase::kWaitBuffer) return;  // the lease goes back
  last_recv_ = loop_.now();
  UseLease(std::move(lease));
  AfterBuffer();
}

void Connection::UseLease(PayloadArena::Lease lease) {
  const size_t payload_part =
      request_->header.op() == data::WRITE ? RoundUpToBlock(frame_.payload_len) : 0;
  if (payload_part > 0) request_->payload = lease.View(0, payload_part);
  if (lease.size() > payload_part) {
    request_->read_buffer = lease.View(payload_part, lease.size() - payload_part);
  }
  request_->lease = std::move(lease);
}

void Connection::AfterBuffer() {
  if (frame_.payload_len == 0) {
    Dispatch();
    return;
  }
  got_ = 0;
  if (request_->header.op() == data::WRITE) {
    phase_ = Phase::kPayload;
  } else {
    phase_ = Phase::kDiscard;  // the handler ignores it; don't hold memory for it
    discard_left_ = frame_.payload_len;
  }
  StartRecv();
}

namespace {

// Requests received on every connection whose replies are not sent yet.
metrics::Gauge& RequestsInFlight() {
  static metrics::Gauge& gauge =
      metrics::Registry::Default()
          .Gauge("ckptfs_storage_requests_in_flight",
                 "Requests received whose replies are not sent yet (on disk, queued or "
                 "being sent).",
                 {})
          .WithLabels({});
  return gauge;
}

}  // namespace

bool Connection::Authenticate(const data::RequestHeader& header) {
  const std::string& expected = loop_.options().credential;
  std::string why;
  if (header.op() != data::HELLO) {
    why = "no credential presented (the connection did not open with HELLO)";
  } else if (expected.empty() || CredentialMatches(header.credential(), expected) ||
             (!loop_.options().server_credential.empty() &&
              CredentialMatches(header.credential(), loop_.options().server_credential))) {
    authenticated_ = true;
    stranger_.Release();
    return true;
  } else {
    why = header.credential().empty() ? "an empty credential presented"
                                      : "the credential presented is not this cluster's";
  }
  if (std::string held_back; RefusalLog().Allow(&held_back)) {
    CKPTFS_LOG(kWarning) << "refused a data connection from " << peer_ << ": " << why << held_back;
  }
  Fail(ErrnoStatus(EACCES, absl::StrCat("this storage server wants the cluster's credential: ", why,
                                        "; give the client --credential_file=PATH of the "
                                        "cluster's credential file (`ckptfs up` makes "
                                        "<state dir>/credential)")),
       /*logged=*/true);
  return false;
}

void Connection::AnswerHello() {
  std::unique_ptr<Request> hello = std::move(request_);
  data::ResponseHeader reply;
  reply.set_request_id(hello->header.request_id());
  hello->head = ReplyHead(reply, 0);
  out_.push_back(std::move(hello));
  StartSend();
}

void Connection::Dispatch() {
  if (request_->header.op() == data::HELLO) {
    AnswerHello();
    NextFrame();
    return;
  }
  request_->connection = this;
  request_->sink = &loop_;
  request_->counted = true;
  ++in_flight_;
  RequestsInFlight().Add(1);
  loop_.disk().Submit(std::move(request_));
  NextFrame();
}

void Connection::NextFrame() {
  got_ = 0;
  frame_ = FramePrefix();
  phase_ = in_flight_ >= loop_.options().max_in_flight ? Phase::kPaused : Phase::kPrefix;
  StartRecv();
}

void Connection::OnDone(std::unique_ptr<Request> request) {
  if (closed_ || phase_ == Phase::kErrorSent || phase_ == Phase::kLinger) {
    Retire(std::move(request));  // nobody to answer
    return;
  }
  if (request->header.op() != data::READ) {
    // The payload is on disk: free its memory before the reply goes out.
    request->payload = AlignedBuffer();
    request->lease.Return();
  }
  request->head = ReplyHead(request->reply.header, request->reply.payload.size());
  out_.push_back(std::move(request));
  StartSend();
}

void Connection::StartSend() {
  if (closed_ || send_pending_ || out_.empty()) return;
  iov_.clear();
  size_t bytes = 0;
  size_t replies = 0;
  for (const std::unique_ptr<Request>& r : out_) {
    if (iov_.size() + 2 > kMaxIov) break;
    const size_t head = r->head.size();
    const size_t total = head + r->reply.payload.size();
    size_t at = r->sent;
    if (at < head) {
      iov_.push_back({r->head.data() + at, head - at});
      at = head;
    }
    if (at < total) {
      iov_.push_back({const_cast<char*>(r->reply.payload.data()) + (at - head), total - at});
    }
    bytes += total - r->sent;
    ++replies;
  }
  io_uring_sqe* sqe = loop_.Sqe();
  if (sqe == nullptr) {
    RetryLater();
    return;
  }
  msg_ = msghdr();
  msg_.msg_iov = iov_.data();
  msg_.msg_iovlen = iov_.size();
  if (loop_.zero_copy() && bytes >= kMinZeroCopyBytes) {
    auto* send = new ZeroCopySend{this, {}};
    for (size_t i = 0; i < replies; ++i) {
      ++out_[i]->zc_refs;
      send->requests.push_back(out_[i].get());
    }
    io_uring_prep_sendmsg_zc(sqe, socket_.get(), &msg_, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(send) | EventLoop::kTagZeroCopy);
    zero_copy_send_ = send;
    loop_.CountSend(true);
  } else {
    const bool dont_wait = loop_.options().nonblocking_sockets && !send_poll_first_;
    io_uring_prep_sendmsg(sqe, socket_.get(), &msg_, MSG_NOSIGNAL | (dont_wait ? MSG_DONTWAIT : 0));
    if (send_poll_first_) sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(this) | EventLoop::kTagSend);
    loop_.CountSend(false);
  }
  last_send_ = loop_.now();
  send_pending_ = true;
  sending_ = replies;
}

void Connection::OnSend(int res, uint32_t flags, ZeroCopySend* zero_copy) {
  if (zero_copy != nullptr && (flags & IORING_CQE_F_NOTIF) != 0) {
    // The kernel is done with the memory of that send.
    --zero_copy_notifications_;
    ReleaseZeroCopy(zero_copy);
    return;
  }
  send_pending_ = false;
  sending_ = 0;
  send_poll_first_ = res == -EAGAIN;
  if (zero_copy != nullptr) {
    zero_copy_send_ = nullptr;
    if ((flags & IORING_CQE_F_MORE) != 0) {
      ++zero_copy_notifications_;  // released when the notification comes
    } else {
      ReleaseZeroCopy(zero_copy);
    }
  }
  if (closed_) {
    while (!out_.empty()) {
      std::unique_ptr<Request> request = std::move(out_.front());
      out_.pop_front();
      Retire(std::move(request));
    }
    return;
  }
  if (res < 0) {
    if (Transient(res)) {
      loop_.CountRetry();
      StartSend();
      return;
    }
    if (zero_copy != nullptr && (res == -EOPNOTSUPP || res == -EINVAL)) {
      loop_.DisableZeroCopy();
      StartSend();
      return;
    }
    Close(absl::StrCat("send failed: ", std::strerror(-res)));
    return;
  }
  if (res == 0) {
    Close("send made no progress");
    return;
  }
  last_send_ = loop_.now();
  Advance(static_cast<size_t>(res));
  if (out_.empty() && phase_ == Phase::kErrorSent) {
    // The error frame is out: FIN, then drop what the peer still sends.
    ::shutdown(socket_.get(), SHUT_WR);
    phase_ = Phase::kLinger;
    discard_left_ = kLingerBytes;
    linger_until_ = loop_.now() + kLingerTimeout;
    StartRecv();
    return;
  }
  StartSend();
}

void Connection::Advance(size_t sent) {
  while (sent > 0 && !out_.empty()) {
    Request& r = *out_.front();
    const size_t total = r.head.size() + r.reply.payload.size();
    const size_t take = std::min(sent, total - r.sent);
    r.sent += take;
    sent -= take;
    if (r.sent == total) {
      std::unique_ptr<Request> done = std::move(out_.front());
      out_.pop_front();
      Retire(std::move(done));
    }
  }
}

void Connection::ReleaseZeroCopy(ZeroCopySend* send) {
  for (Request* r : send->requests) --r->zc_refs;
  delete send;
  zero_copy_held_.erase(
      std::remove_if(zero_copy_held_.begin(), zero_copy_held_.end(),
                     [](const std::unique_ptr<Request>& r) { return r->zc_refs == 0; }),
      zero_copy_held_.end());
}

void Connection::Retire(std::unique_ptr<Request> request) {
  if (request->counted) {
    --in_flight_;
    RequestsInFlight().Sub(1);
    if (phase_ == Phase::kPaused && in_flight_ < loop_.options().max_in_flight) {
      phase_ = Phase::kPrefix;
      StartRecv();
    }
  }
  if (request->zc_refs > 0) zero_copy_held_.push_back(std::move(request));
}

void Connection::Fail(const absl::Status& status, bool logged) {
  if (closed_ || phase_ == Phase::kErrorSent || phase_ == Phase::kLinger) return;
  if (served_ && !logged) {
    CKPTFS_LOG(kInfo) << "connection from " << peer_ << " closed: " << status.message();
  }
  phase_ = Phase::kErrorSent;
  DropUnsentReplies();
  data::ResponseHeader reply;  // request_id 0: about the connection itself
  const int err = ErrnoFromStatus(status);
  reply.set_error(err == 0 ? EIO : err);
  reply.set_message(std::string(status.message()));
  auto error = std::make_unique<Request>();
  error->head = ReplyHead(reply, 0);
  out_.push_back(std::move(error));
  StartSend();
}

void Connection::DropUnsentReplies() {
  // Replies in the send in flight stay (it reads their memory), and so does
  // a partly sent front: it must finish, or the error frame would land
  // inside it.
  const size_t keep =
      std::max(sending_, !out_.empty() && out_.front()->sent > 0 ? size_t{1} : size_t{0});
  while (out_.size() > keep) {
    std::unique_ptr<Request> request = std::move(out_.back());
    out_.pop_back();
    Retire(std::move(request));
  }
}

void Connection::Close(absl::string_view why) {
  if (closed_) return;
  if (!why.empty()) {
    CKPTFS_LOG(kInfo) << "connection from " << peer_ << " closed: " << why;
  }
  closed_ = true;
  phase_ = Phase::kClosed;
  stranger_.Release();
  // Ends the operations in flight on the socket: a receive sees EOF, a send
  // EPIPE. The descriptor itself is closed with the Connection. (No
  // io_uring cancel by descriptor: it could be submitted after the
  // descriptor was closed and reused by a new connection.)
  ::shutdown(socket_.get(), SHUT_RDWR);
  if (ticket_ != 0) {
    if (!loop_.pool().Cancel(ticket_)) grant_pending_ = true;  // the grant is on its way
    ticket_ = 0;
  }
  if (!recv_pending_) request_.reset();
  if (!send_pending_) {
    while (!out_.empty()) {
      std::unique_ptr<Request> request = std::move(out_.front());
      out_.pop_front();
      Retire(std::move(request));
    }
  }
}

void Connection::Tick(absl::Time now) {
  if (closed_) return;
  if (phase_ == Phase::kLinger) {
    if (now >= linger_until_) Close("");
    return;
  }
  if (!authenticated_ && now - opened_ > kHelloTimeout) {
    // A connection that never presents the credential holds a slot of
    // max_connections: it gets kHelloTimeout to do so.
    if (std::string held_back; RefusalLog().Allow(&held_back)) {
      CKPTFS_LOG(kWarning) << "closed a data connection from " << peer_ << ": no HELLO within "
                           << absl::FormatDuration(kHelloTimeout) << held_back;
    }
    Close("");
    return;
  }
  const absl::Duration stall = loop_.options().stall_timeout;
  const bool inside_frame = (phase_ == Phase::kPrefix && got_ > 0) || phase_ == Phase::kHeader ||
                            phase_ == Phase::kPayload || phase_ == Phase::kDiscard;
  if (inside_frame && recv_pending_ && now - last_recv_ > stall) {
    Close(absl::StrCat("no bytes inside a frame for ", absl::FormatDuration(now - last_recv_)));
  } else if (send_pending_ && now - last_send_ > stall) {
    Close(absl::StrCat("replies not read for ", absl::FormatDuration(now - last_send_)));
  }
}

bool Connection::Finished() const {
  return closed_ && !recv_pending_ && !send_pending_ && zero_copy_notifications_ == 0 &&
         in_flight_ == 0 && !grant_pending_ && !retry_queued;
}

}  // namespace ckptfs::storage
