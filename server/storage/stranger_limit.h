// StrangerLimit: how many data connections one peer host may hold open
// before presenting the cluster's credential.
//
// A connection counts from its accept until it authenticates (HELLO with
// the credential) or closes. When a host that already holds `per_host`
// such connections opens another, the oldest of them that has sent nothing
// (no byte waiting in its socket; else the oldest of all) is shut down
// (shutdown(2): its loop sees the end of the stream and closes it) and the
// new one is admitted. So a stranger opening connections in a loop holds
// at most `per_host` descriptors of the server, and a client on the same
// host is not pushed out: its HELLO follows its connect at once and waits
// in the socket until the loop reads it, which spares the connection.
// Together with the connection's HELLO deadline (connection.h), strangers
// cannot fill max_connections.
//
// A Ticket stands for one counted connection; it must go before the
// connection's descriptor is closed (declare it after the descriptor), so
// that the shutdown of an eviction never reaches a reused descriptor.
//
// Thread-safety: thread-safe; Tickets are moved between threads freely.
#ifndef CKPTFS_SERVER_STORAGE_STRANGER_LIMIT_H_
#define CKPTFS_SERVER_STORAGE_STRANGER_LIMIT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ckptfs::storage {

class StrangerLimit {
 public:
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { Release(); }

    // The connection authenticated or closes: it no longer counts.
    void Release();
    bool held() const { return limit_ != nullptr; }

   private:
    friend class StrangerLimit;
    Ticket(StrangerLimit* limit, std::string host, int fd)
        : limit_(limit), host_(std::move(host)), fd_(fd) {}

    StrangerLimit* limit_ = nullptr;
    std::string host_;
    int fd_ = -1;
  };

  // REQUIRES: per_host >= 1.
  explicit StrangerLimit(size_t per_host) : per_host_(per_host) {}

  // Counts connection `fd` from `peer` ("host:port"; the host counts),
  // shutting down the oldest of that host's when it holds per_host.
  Ticket Admit(absl::string_view peer, int fd) ABSL_LOCKS_EXCLUDED(mu_);

  // Connections shut down to make room, since start.
  uint64_t evicted() const { return evicted_.load(std::memory_order_relaxed); }
  size_t per_host() const { return per_host_; }

 private:
  void Release(const std::string& host, int fd) ABSL_LOCKS_EXCLUDED(mu_);

  const size_t per_host_;
  std::atomic<uint64_t> evicted_{0};
  absl::Mutex mu_;
  // Per host, its counted descriptors, oldest first.
  absl::flat_hash_map<std::string, std::deque<int>> by_host_ ABSL_GUARDED_BY(mu_);
};

// The host a peer "host:port" counts as: its address; for IPv6 its /64
// ("2001:db8::/64": one machine may hold the whole prefix), an IPv4-mapped
// one as the IPv4 address; the whole text if it has no port.
std::string HostOfPeer(absl::string_view peer);

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_STRANGER_LIMIT_H_
