// See http_server.h.
#include "common/metrics/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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

void MetricsHttpServer::Run() {
  std::vector<Client> clients;
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_read_.get(), POLLIN, 0});
    fds.push_back({listener_.get(), POLLIN, 0});
    absl::Time next_deadline = absl::InfiniteFuture();
    for (const Client& client : clients) {
      const short events = client.phase == Client::Phase::kSending ? POLLOUT : POLLIN;
      fds.push_back({client.fd.get(), events, 0});
      next_deadline = std::min(next_deadline, client.deadline);
    }
    int timeout_ms = -1;
    if (next_deadline != absl::InfiniteFuture()) {
      const absl::Duration left = next_deadline - absl::Now();
      timeout_ms =
          left <= absl::ZeroDuration() ? 0 : static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    }
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) {
      CKPTFS_LOG(kError) << "metrics server: poll: " << std::strerror(errno);
      return;
    }
    if (fds[0].revents != 0) return;  // stopping
    // Move the clients along (the poll entries line up with them), dropping
    // those done or out of time.
    const absl::Time now = absl::Now();
    std::vector<Client> kept;
    kept.reserve(clients.size() + 1);
    for (size_t i = 0; i < clients.size(); ++i) {
      Client& client = clients[i];
      const bool woken = ready > 0 && fds[i + 2].revents != 0;
      // A client gets io_timeout for its request and response however it
      // trickles them (the drain has its own deadline).
      const bool keep = (!woken || Advance(client)) && now < client.deadline;
      if (keep) kept.push_back(std::move(client));
    }
    clients.swap(kept);
    if (ready > 0 && fds[1].revents != 0) Accept(clients);
  }
}

void MetricsHttpServer::Accept(std::vector<Client>& clients) {
  UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!conn.valid()) {
    if (errno == EMFILE || errno == ENFILE) {
      // Out of descriptors: back off instead of spinning on the ready listener.
      pollfd wake{wake_read_.get(), POLLIN, 0};
      ::poll(&wake, 1, 100);
    }
    return;
  }
  if (clients.size() >= std::max<size_t>(options_.max_clients, 1)) {
    // Full: the oldest client still sending its request goes (held open
    // by someone who does not scrape), else the oldest of all (one that
    // does not take its response).
    auto oldest = clients.end();
    for (auto it = clients.begin(); it != clients.end(); ++it) {
      if (it->phase == Client::Phase::kReading &&
          (oldest == clients.end() || it->deadline < oldest->deadline)) {
        oldest = it;
      }
    }
    if (oldest == clients.end()) oldest = clients.begin();
    clients.erase(oldest);
  }
  Client client;
  client.fd = std::move(conn);
  client.deadline = absl::Now() + options_.io_timeout;
  clients.push_back(std::move(client));
}

void MetricsHttpServer::StartSending(Client& client, std::string response) {
  client.phase = Client::Phase::kSending;
  client.response = std::move(response);
  client.head.clear();
}

bool MetricsHttpServer::Advance(Client& client) {
  char buf[4096];
  switch (client.phase) {
    case Client::Phase::kReading: {
      const ssize_t n = ::recv(client.fd.get(), buf, sizeof(buf), 0);
      if (n < 0) return errno == EINTR || errno == EAGAIN;
      if (n == 0) return false;  // closed before a whole request head
      client.head.append(buf, static_cast<size_t>(n));
      size_t end = client.head.find("\r\n\r\n");
      if (end == std::string::npos) end = client.head.find("\n\n");
      if (end != std::string::npos && end <= options_.max_request_bytes) {
        client.head.resize(end);
        StartSending(client, Respond(client.head));
      } else if (client.head.size() > options_.max_request_bytes) {
        StartSending(client, Plain("431 Request Header Fields Too Large", false));
      }
      return true;
    }
    case Client::Phase::kSending: {
      const ssize_t n = ::send(client.fd.get(), client.response.data() + client.sent,
                               client.response.size() - client.sent, MSG_NOSIGNAL);
      if (n < 0) return errno == EINTR || errno == EAGAIN;
      client.sent += static_cast<size_t>(n);
      if (client.sent < client.response.size()) return true;
      // Read away what the client still sends (an oversized request) until
      // it closes, so that our close does not reset the response away.
      ::shutdown(client.fd.get(), SHUT_WR);
      client.phase = Client::Phase::kDraining;
      client.response.clear();
      client.deadline = absl::Now() + kDrainTime;
      return true;
    }
    case Client::Phase::kDraining: {
      const ssize_t n = ::recv(client.fd.get(), buf, sizeof(buf), 0);
      if (n < 0) return errno == EINTR || errno == EAGAIN;
      if (n == 0) return false;
      client.drained += static_cast<size_t>(n);
      return client.drained < kDrainBytes;
    }
  }
  return false;
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
