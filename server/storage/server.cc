// See server.h.
#include "server/storage/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/log.h"
#include "proto/data.pb.h"

namespace ckptfs::storage {
namespace {

// TCP keepalive on accepted connections: first probe after this many idle
// seconds, then one every kKeepIntervalS; kKeepCount unanswered probes end it.
constexpr int kKeepIdleS = 60;
constexpr int kKeepIntervalS = 10;
constexpr int kKeepCount = 6;

std::string PeerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return HostPort{host, port}.ToString();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ChunkStore& store,
                                                      const HostPort& listen,
                                                      Options options) {
  auto fd = ListenTcp(listen);
  if (!fd.ok()) return fd.status();
  auto port = LocalPort(fd->get());
  if (!port.ok()) return port.status();
  HostPort address{listen.host, *port};
  std::unique_ptr<Server> server(
      new Server(store, *std::move(fd), std::move(address), options));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

void Server::AcceptLoop() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    UniqueFd socket(::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len,
                              SOCK_CLOEXEC));
    const int err = errno;
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    ReapFinished();
    if (!socket.valid()) {
      if (err == EINTR || err == ECONNABORTED) continue;
      CKPTFS_LOG(kWarning) << "accept on " << address_.ToString() << ": " << std::strerror(err);
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // Out of descriptors or memory: back off instead of spinning.
        mu_.Unlock();
        absl::SleepFor(absl::Milliseconds(100));
        mu_.Lock();
        continue;
      }
      if (err == EINVAL || err == EBADF) return;  // listener shut down
      continue;
    }
    int one = 1;
    ::setsockopt(socket.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // A connection idles without limit between frames, so a client whose
    // host died (no FIN, no RST) would hold its thread, ring and fd forever
    // and, over time, fill max_connections. TCP keepalive finds such peers
    // (after about kKeepIdleS + kKeepCount * kKeepIntervalS) and the blocked
    // read then fails, ending the connection.
    ::setsockopt(socket.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    ::setsockopt(socket.get(), IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleS, sizeof(kKeepIdleS));
    ::setsockopt(socket.get(), IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntervalS,
                 sizeof(kKeepIntervalS));
    ::setsockopt(socket.get(), IPPROTO_TCP, TCP_KEEPCNT, &kKeepCount, sizeof(kKeepCount));
    if (connections_.size() >= options_.max_connections) {
      Refuse(std::move(socket));
      continue;
    }
    auto connection =
        std::make_unique<Connection>(std::move(socket), PeerName(peer), handler_, buffers_,
                                     budget_);
    Connection* raw = connection.get();
    connections_.push_back({std::move(connection), std::thread([raw] { raw->Run(); })});
  }
}

void Server::Refuse(UniqueFd socket) {
  CKPTFS_LOG(kWarning) << "refusing a connection: already serving " << connections_.size()
                       << " (the limit)";
  data::ResponseHeader reply;
  reply.set_error(EAGAIN);
  reply.set_message(absl::StrCat("storage server ", address_.ToString(), " serves ",
                                 options_.max_connections,
                                 " connections already; try again later"));
  // A fresh socket's send buffer takes this small frame without blocking.
  SetSocketTimeouts(socket.get(), absl::Seconds(1)).IgnoreError();
  WriteFrame(socket.get(), reply, nullptr, 0).IgnoreError();
}

void Server::ReapFinished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->connection->finished()) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t Server::active_connections() {
  absl::MutexLock lock(&mu_);
  ReapFinished();
  return connections_.size();
}

void Server::Stop() {
  std::list<Active> connections;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    // Wakes the accept thread: accept() fails with EINVAL on a shut socket.
    ::shutdown(listen_fd_.get(), SHUT_RDWR);
    for (Active& active : connections_) active.connection->Shutdown();
    budget_.Close();  // a connection waiting for memory gives up now
    connections = std::move(connections_);
    connections_.clear();
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  for (Active& active : connections) active.thread.join();
  listen_fd_.Reset();
}

}  // namespace ckptfs::storage
