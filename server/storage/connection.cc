// See connection.h.
#include "server/storage/connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/log.h"
#include "common/net.h"
#include "common/uring.h"
#include "proto/data.pb.h"
#include "server/storage/aligned_buffer.h"

namespace ckptfs::storage {
namespace {

// A peer that stalls inside a frame (or does not read its replies) for this
// long loses its connection. Idle time between frames is unlimited.
constexpr absl::Duration kStallTimeout = absl::Seconds(60);
constexpr unsigned kRingEntries = 64;
// How long a request waits for the server's memory budget before it is
// refused with EAGAIN.
constexpr absl::Duration kBudgetWait = absl::Seconds(30);
// Lingering close after a protocol error: at most a frame's worth of input,
// for at most this long.
constexpr absl::Duration kLingerTimeout = absl::Seconds(2);
constexpr size_t kLingerBytes = kFramePrefixSize + kMaxFrameHeader + kMaxFramePayload;

// Waits until the socket has bytes (or EOF/error) to read.
absl::Status WaitReadable(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  while (::poll(&pfd, 1, -1) < 0) {
    if (errno != EINTR) return SyscallError(errno, "poll");
  }
  return absl::OkStatus();
}

}  // namespace

void Connection::Shutdown() { ::shutdown(socket_.get(), SHUT_RDWR); }

void Connection::Run() {
  absl::Status status = Serve();
  if (!status.ok() && !IsEndOfStream(status)) {
    CKPTFS_LOG(kInfo) << "connection from " << peer_ << " closed: " << status.message();
    // Lingering close: say we are done (FIN), then read and drop what the
    // peer is still sending, so that it can finish its send and read our
    // error frame, and so that closing with unread input does not reset the
    // connection under it. Bounded in bytes and time.
    ::shutdown(socket_.get(), SHUT_WR);
    DrainInput();
  }
  Shutdown();
  finished_.store(true, std::memory_order_release);
}

void Connection::DrainInput() {
  if (!SetSocketTimeouts(socket_.get(), kLingerTimeout).ok()) return;
  const absl::Time deadline = absl::Now() + kLingerTimeout;
  char sink[64 * 1024];
  size_t drained = 0;
  while (drained < kLingerBytes && absl::Now() < deadline) {
    const ssize_t n = ::recv(socket_.get(), sink, sizeof(sink), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

absl::Status Connection::SendError(uint64_t request_id, const absl::Status& status) {
  data::ResponseHeader reply;
  reply.set_request_id(request_id);
  const int err = ErrnoFromStatus(status);
  reply.set_error(err == 0 ? EIO : err);
  reply.set_message(std::string(status.message()));
  return WriteFrame(socket_.get(), reply, nullptr, 0);
}

absl::Status Connection::Serve() {
  const int fd = socket_.get();
  if (absl::Status s = SetSocketTimeouts(fd, kStallTimeout); !s.ok()) return s;
  auto ring = Ring::Create(kRingEntries);
  if (!ring.ok()) {
    SendError(0, ring.status()).IgnoreError();
    return ring.status();
  }
  std::string header_bytes;
  data::RequestHeader request;
  for (;;) {
    if (absl::Status s = WaitReadable(fd); !s.ok()) return s;
    char raw[kFramePrefixSize];
    if (absl::Status s = RecvAll(fd, raw, sizeof(raw)); !s.ok()) return s;
    auto prefix = DecodeFramePrefix(absl::string_view(raw, sizeof(raw)));
    if (!prefix.ok()) {
      // The frame boundary is lost: say why, then hang up.
      SendError(0, prefix.status()).IgnoreError();
      return prefix.status();
    }
    header_bytes.resize(prefix->header_len);
    if (absl::Status s = RecvAll(fd, header_bytes.data(), header_bytes.size()); !s.ok()) {
      return s;
    }
    request.Clear();
    if (!request.ParseFromString(header_bytes)) {
      absl::Status bad = ErrnoStatus(
          EBADMSG, absl::StrCat("frame header of ", header_bytes.size(),
                                " bytes is not a valid RequestHeader protobuf"));
      SendError(0, bad).IgnoreError();
      return bad;
    }
    // The bytes this request will hold: its payload, and a READ's reply.
    size_t need = prefix->payload_len;
    if (request.op() == data::READ) need += std::min(request.length(), kMaxFramePayload);
    auto reservation = budget_.Reserve(need, kBudgetWait);
    if (!reservation.ok()) {
      if (absl::Status s = DiscardPayload(fd, prefix->payload_len); !s.ok()) return s;
      if (absl::Status s = SendError(request.request_id(), reservation.status()); !s.ok()) {
        return s;
      }
      continue;
    }
    AlignedBuffer payload;
    if (prefix->payload_len > 0) {
      auto taken = buffers_.Take(prefix->payload_len);
      if (!taken.ok()) {
        // Out of memory: skip the payload, refuse this request, go on.
        if (absl::Status s = DiscardPayload(fd, prefix->payload_len); !s.ok()) return s;
        if (absl::Status s = SendError(request.request_id(), taken.status()); !s.ok()) {
          return s;
        }
        continue;
      }
      payload = *std::move(taken);
      if (absl::Status s = RecvAll(fd, payload.data(), prefix->payload_len); !s.ok()) {
        return IsEndOfStream(s) ? ErrnoStatus(ECONNRESET, "connection closed inside a frame")
                                : s;
      }
      payload.set_size(prefix->payload_len);
    }
    Reply reply = handler_.Handle(**ring, request, payload);
    buffers_.Give(std::move(payload));
    absl::Status sent =
        WriteFrame(fd, reply.header, reply.payload.data(), reply.payload.size());
    buffers_.Give(std::move(reply.buffer));
    if (!sent.ok()) return sent;
  }
}

}  // namespace ckptfs::storage
