// See ports.h.
#include "tools/ports.h"

#include <algorithm>
#include <cerrno>

#include "absl/time/time.h"
#include "common/errno_status.h"
#include "common/tcp.h"

namespace ckptfs::tools {

absl::Status CheckPortFree(const std::string& host, uint16_t port) {
  absl::StatusOr<UniqueFd> fd = ListenTcp(HostPort{host, port}, /*backlog=*/1);
  return fd.status();
}

std::optional<uint16_t> FindFreePortRange(const std::string& host, uint16_t after, int count,
                                          const std::vector<uint16_t>& avoid) {
  for (uint32_t base = static_cast<uint32_t>(after) + 1;
       base + static_cast<uint32_t>(count) - 1 <= 65535; ++base) {
    bool ok = true;
    for (int i = 0; i < count && ok; ++i) {
      const uint16_t port = static_cast<uint16_t>(base + i);
      ok = std::find(avoid.begin(), avoid.end(), port) == avoid.end() &&
           CheckPortFree(host, port).ok();
    }
    if (ok) return static_cast<uint16_t>(base);
  }
  return std::nullopt;
}

bool PortAcceptsConnections(const std::string& host, uint16_t port) {
  return ConnectTcp(HostPort{host, port}, absl::Milliseconds(500)).ok();
}

}  // namespace ckptfs::tools
