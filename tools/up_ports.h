// The port checks `ckptfs up` makes before it starts anything: every port
// the cluster will listen on must be free on --host and no two roles may
// share one. Each error names the busy ports, the flag that set them, and a
// free alternative to pass instead (tools/ports.h finds it). A check can go
// stale the moment it answers; it exists to turn the common mistake (a
// second cluster on the same ports) into a clear message. Thread-safe.
#ifndef CKPTFS_TOOLS_UP_PORTS_H_
#define CKPTFS_TOOLS_UP_PORTS_H_

#include "absl/status/status.h"
#include "tools/up_config.h"

namespace ckptfs::tools {

// The metadata service's port and the storage servers' ports.
absl::Status CheckPorts(const UpConfig& config);

// The metrics ports (none when config.metrics_port is 0).
absl::Status CheckMetricsPorts(const UpConfig& config);

// --meta-backend etcd: the second metadata server's port and the etcd
// members' ports (nothing to check otherwise).
absl::Status CheckEtcdPorts(const UpConfig& config);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_UP_PORTS_H_
