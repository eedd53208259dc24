// Checking that TCP ports are free before a cluster starts, and suggesting
// free ones when they are not. A port is free when a listening socket can be
// bound to it on the host (SO_REUSEADDR, as the daemons bind). The answer
// can go stale the moment it is given; it exists to turn the common mistake
// (a second cluster on the same ports) into a clear message before anything
// starts. Thread-safe.
#ifndef CKPTFS_TOOLS_PORTS_H_
#define CKPTFS_TOOLS_PORTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ckptfs::tools {

// OK when `host:port` can be listened on; EADDRINUSE status when taken;
// another error when `host` is not an address of this machine.
absl::Status CheckPortFree(const std::string& host, uint16_t port);

// The lowest port p > `after` such that p .. p+count-1 are all free on
// `host` and none is in `avoid`; nullopt if none below 65536.
std::optional<uint16_t> FindFreePortRange(const std::string& host, uint16_t after, int count,
                                          const std::vector<uint16_t>& avoid);

// Is something accepting TCP connections on host:port right now?
bool PortAcceptsConnections(const std::string& host, uint16_t port);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_PORTS_H_
