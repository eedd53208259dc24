// See stranger_limit.h.
#include "server/storage/stranger_limit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "common/tcp.h"

namespace ckptfs::storage {

StrangerLimit::Ticket& StrangerLimit::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    limit_ = std::exchange(other.limit_, nullptr);
    host_ = std::move(other.host_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void StrangerLimit::Ticket::Release() {
  if (limit_ == nullptr) return;
  std::exchange(limit_, nullptr)->Release(host_, fd_);
}

StrangerLimit::Ticket StrangerLimit::Admit(absl::string_view peer, int fd) {
  std::string host = HostOfPeer(peer);
  absl::MutexLock lock(&mu_);
  std::deque<int>& fds = by_host_[host];
  while (fds.size() >= per_host_) {
    // The oldest that has sent nothing yet; a connection whose HELLO
    // waits in its socket (its loop has not read it yet) is a client's.
    // Only when every one has sent something does the oldest go.
    auto victim = std::find_if(fds.begin(), fds.end(), [](int fd) {
      int unread = 0;
      return ::ioctl(fd, FIONREAD, &unread) == 0 && unread == 0;
    });
    if (victim == fds.end()) victim = fds.begin();
    // Still open: its Ticket, which goes before its descriptor closes,
    // would have removed it under mu_.
    ::shutdown(*victim, SHUT_RDWR);
    fds.erase(victim);
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
  fds.push_back(fd);
  return Ticket(this, std::move(host), fd);
}

void StrangerLimit::Release(const std::string& host, int fd) {
  absl::MutexLock lock(&mu_);
  auto it = by_host_.find(host);
  if (it == by_host_.end()) return;
  std::deque<int>& fds = it->second;
  auto at = std::find(fds.begin(), fds.end(), fd);
  if (at != fds.end()) fds.erase(at);  // absent: evicted already
  if (fds.empty()) by_host_.erase(it);
}

std::string HostOfPeer(absl::string_view peer) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(peer);
  if (!parsed.ok()) return std::string(peer);
  in6_addr v6;
  if (::inet_pton(AF_INET6, parsed->host.c_str(), &v6) != 1) return parsed->host;
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    char v4[INET_ADDRSTRLEN];
    return ::inet_ntop(AF_INET, &v6.s6_addr[12], v4, sizeof(v4)) != nullptr ? std::string(v4)
                                                                            : parsed->host;
  }
  // One host may hold a whole /64: it counts as one.
  std::fill(std::begin(v6.s6_addr) + 8, std::end(v6.s6_addr), 0);
  char prefix[INET6_ADDRSTRLEN];
  if (::inet_ntop(AF_INET6, &v6, prefix, sizeof(prefix)) == nullptr) return parsed->host;
  return std::string(prefix) + "/64";
}

}  // namespace ckptfs::storage
