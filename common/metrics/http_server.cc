// See http_server.h.
#include "common/metrics/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/metrics/exposition.h"
#include "common/tcp.h"

namespace ckptfs::metrics {

namespace {

// After answering, how long and how much of a client's unread request is
// read away so that closing does not reset the connection before the
// client has read the response.
constexpr absl::Duration kDrainTime = absl::Seconds(1);
constexpr size_t kDrainBytes = 1 << 20;

std::string BoundAddress(int fd) {
  sockaddr_storage storage{};
  socklen_t len = sizeof(storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  if (storage.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return absl::StrCat(host, ":", ntohs(in->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return absl::StrCat("[", host, "]:", ntohs(in6->sin6_port));
  }
  return "?";
}

std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view body, bool head_only, absl::string_view extra = "") {
  std::string out =
      absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                   "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n", extra, "\r\n");
  if (!head_only) absl::StrAppend(&out, body);
  return out;
}

std::string Plain(absl::string_view status, bool head_only, absl::string_view extra = "") {
  return Response(status, "text/plain; charset=utf-8", absl::StrCat(status, "\n"), head_only,
                  extra);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(UniqueFd listener,
                                                                            Registry* registry,
                                                                            Options options) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return ErrnoStatus(errno, "metrics server: pipe");
  }
  UniqueFd wake_read(fds[0]);
  UniqueFd wake_write(fds[1]);
  // Non-blocking accept: a client that connects and resets before accept
  // must not leave the thread blocked where the wake-up cannot reach it.
  const int flags = ::fcntl(listener.get(), F_GETFL);
  if (flags < 0 || ::fcntl(listener.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoStatus(errno, "metrics server: fcntl O_NONBLOCK");
  }
  std::string address = BoundAddress(listener.get());
  std::unique_ptr<MetricsHttpServer> server(
      new MetricsHttpServer(std::move(listener), std::move(wake_read), std::move(wake_write),
                            registry, options, std::move(address)));
  server->thread_ = std::thread([raw = server.get()] { raw->Run(); });
  return server;
}

MetricsHttpServer::MetricsHttpServer(UniqueFd listener, UniqueFd wake_read, UniqueFd wake_write,
                                     Registry* registry, Options options, std::string address)
    : listener_(std::move(listener)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      registry_(registry),
      options_(options),
      address_(std::move(address)) {}

MetricsHttpServer::~MetricsHttpServer() {
  const char byte = 1;
  ssize_t n;
  do {
    n = ::write(wake_write_.get(), &byte, 1);
  } while (n < 0 && errno == EINTR);
  if (thread_.joinable()) thread_.join();
}

bool MetricsHttpServer::WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd fds[2] = {{fd, events, 0}, {wake_read_.get(), POLLIN, 0}};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    const int ready = ::poll(fds, 2, ms);
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    if (fds[1].revents != 0) return false;  // stopping
    if (fds[0].revents != 0) return true;   // ready, or an error the next call reports
  }
}

void MetricsHttpServer::Run() {
  for (;;) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    const int ready = ::poll(fds, 2, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      CKPTFS_LOG(kError) << "metrics server: poll: " << std::strerror(errno);
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: back off instead of spinning on the ready listener.
        WaitFor(wake_read_.get(), 0, absl::Now() + absl::Milliseconds(100));
      }
      continue;
    }
    Serve(conn.get());
  }
}

void MetricsHttpServer::Serve(int fd) {
  const absl::Time deadline = absl::Now() + options_.io_timeout;
  std::string head;
  std::string response;
  char buf[4096];
  for (;;) {
    if (!WaitFor(fd, POLLIN, deadline)) return;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;
    }
    if (n == 0) return;  // closed before a whole request head
    head.append(buf, static_cast<size_t>(n));
    size_t end = head.find("\r\n\r\n");
    if (end == std::string::npos) end = head.find("\n\n");
    if (end != std::string::npos && end <= options_.max_request_bytes) {
      head.resize(end);
      response = Respond(head);
      break;
    }
    if (head.size() > options_.max_request_bytes) {
      response = Plain("431 Request Header Fields Too Large", false);
      break;
    }
  }
  size_t sent = 0;
  while (sent < response.size()) {
    if (!WaitFor(fd, POLLOUT, deadline)) return;
    const ssize_t n = ::send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;
    }
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  // Read away what the client still sends (an oversized request) until it
  // closes, so that our close does not reset the response away.
  const absl::Time drain_deadline = absl::Now() + kDrainTime;
  size_t drained = 0;
  while (drained < kDrainBytes && WaitFor(fd, POLLIN, drain_deadline)) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    drained += static_cast<size_t>(n);
  }
}

std::string MetricsHttpServer::Respond(absl::string_view head) {
  absl::string_view line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
    return Plain("400 Bad Request", false);
  }
  const bool head_only = parts[0] == "HEAD";
  if (parts[0] != "GET" && !head_only) {
    return Plain("405 Method Not Allowed", false, "Allow: GET, HEAD\r\n");
  }
  absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") return Plain("404 Not Found", head_only);
  return Response("200 OK", kExpositionContentType, registry_->Render(), head_only);
}

absl::StatusOr<UniqueFd> ListenForMetrics(absl::string_view listen) {
  absl::StatusOr<HostPort> addr = ParseHostPort(listen);
  if (!addr.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics_listen: ", addr.status().message()));
  }
  absl::StatusOr<UniqueFd> fd = ListenTcp(*addr, 16);
  if (!fd.ok()) {
    return ErrnoStatus(ErrnoFromStatus(fd.status()),
                       absl::StrCat("--metrics_listen: ", fd.status().message()));
  }
  return fd;
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetricsServer(absl::string_view listen,
                                                                      Registry* registry) {
  absl::StatusOr<UniqueFd> fd = ListenForMetrics(listen);
  if (!fd.ok()) return fd.status();
  return MetricsHttpServer::Start(*std::move(fd), registry);
}

}  // namespace ckptfs::metrics
