// See tcp.h.
#include "common/tcp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"

namespace ckptfs {
namespace {

constexpr absl::string_view kEndOfStream = "end of stream";

absl::StatusOr<sockaddr_storage> Resolve(const HostPort& addr, socklen_t* len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string port = absl::StrCat(addr.port);
  const int rc = ::getaddrinfo(addr.host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    return ErrnoStatus(EHOSTUNREACH,
                       absl::StrCat("cannot resolve ", addr.ToString(), ": ", gai_strerror(rc)));
  }
  sockaddr_storage storage{};
  std::memcpy(&storage, result->ai_addr, result->ai_addrlen);
  *len = result->ai_addrlen;
  ::freeaddrinfo(result);
  return storage;
}

}  // namespace

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text) {
  HostPort out;
  absl::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("bad address \"", text, "\": expected [host]:port"));
    }
    out.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad address \"", text, "\": expected host:port"));
    }
    out.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in address \"", text, "\""));
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

absl::StatusOr<UniqueFd> ListenTcp(const HostPort& addr, int backlog) {
  socklen_t len = 0;
  auto storage = Resolve(addr, &len);
  if (!storage.ok()) return storage.status();
  UniqueFd fd(::socket(storage->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SyscallError(errno, "socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&*storage), len) != 0) {
    const int err = errno;
    if (err == EADDRINUSE) {
      return ErrnoStatus(err, absl::StrCat("address ", addr.ToString(),
                                           " is already in use: another ckptfs "
                                           "or another program listens there; "
                                           "choose another port"));
    }
    return SyscallError(err, absl::StrCat("bind ", addr.ToString()));
  }
  if (::listen(fd.get(), backlog) != 0) {
    return SyscallError(errno, absl::StrCat("listen ", addr.ToString()));
  }
  return fd;
}

absl::StatusOr<uint16_t> LocalPort(int fd) {
  sockaddr_storage storage{};
  socklen_t len = sizeof(storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &len) != 0) {
    return SyscallError(errno, "getsockname");
  }
  if (storage.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port);
}

namespace {

// One connect attempt to one resolved address.
absl::StatusOr<UniqueFd> ConnectOne(const sockaddr* address, socklen_t len, const HostPort& addr,
                                    absl::Duration timeout) {
  UniqueFd fd(::socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return SyscallError(errno, "socket");
  if (::connect(fd.get(), address, len) != 0) {
    if (errno != EINPROGRESS) {
      return SyscallError(errno, absl::StrCat("connect to ", addr.ToString()));
    }
    pollfd pfd{fd.get(), POLLOUT, 0};
    const absl::Time deadline = absl::Now() + timeout;
    int rc = 0;
    for (;;) {
      const int64_t left_ms =
          std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
      rc = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left_ms, 1 << 30)));
      if (rc >= 0 || errno != EINTR) break;
    }
    if (rc == 0) {
      return ErrnoStatus(ETIMEDOUT, absl::StrCat("connect to ", addr.ToString(), ": timed out"));
    }
    int err = 0;
    socklen_t err_len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (rc < 0) err = errno;
    if (err != 0) return SyscallError(err, absl::StrCat("connect to ", addr.ToString()));
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

absl::StatusOr<UniqueFd> ConnectTcp(const HostPort& addr, absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string port = absl::StrCat(addr.port);
  const int rc = ::getaddrinfo(addr.host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    return ErrnoStatus(EHOSTUNREACH,
                       absl::StrCat("cannot resolve ", addr.ToString(), ": ", gai_strerror(rc)));
  }
  // A name may resolve to several addresses (e.g. "localhost" to ::1 and
  // 127.0.0.1) of which only one has a listener: try each in turn.
  absl::StatusOr<UniqueFd> fd = ErrnoStatus(EHOSTUNREACH, "no address");
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    fd = ConnectOne(ai->ai_addr, ai->ai_addrlen, addr, timeout);
    if (fd.ok()) break;
  }
  ::freeaddrinfo(result);
  return fd;
}

absl::Status SetSocketTimeouts(int fd, absl::Duration timeout) {
  timeval tv = absl::ToTimeval(timeout);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return SyscallError(errno, "setsockopt timeouts");
  }
  return absl::OkStatus();
}

absl::Status SendAll(int fd, struct iovec* iov, int iovcnt) {
  while (iovcnt > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = (errno == EAGAIN || errno == EWOULDBLOCK) ? ETIMEDOUT : errno;
      return SyscallError(err, "send");
    }
    size_t left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return absl::OkStatus();
}

absl::Status SendAll(int fd, const void* data, size_t size) {
  iovec iov{const_cast<void*>(data), size};
  return SendAll(fd, &iov, 1);
}

absl::Status RecvAll(int fd, void* data, size_t size) {
  auto* out = static_cast<char*>(data);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::recv(fd, out + got, size - got, 0);
    if (n == 0) {
      if (got == 0) return absl::OutOfRangeError(kEndOfStream);
      return ErrnoStatus(ECONNRESET, "connection closed by peer mid-message");
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = (errno == EAGAIN || errno == EWOULDBLOCK) ? ETIMEDOUT : errno;
      return SyscallError(err, "recv");
    }
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

bool IsEndOfStream(const absl::Status& status) {
  return status.code() == absl::StatusCode::kOutOfRange && status.message() == kEndOfStream;
}

}  // namespace ckptfs
