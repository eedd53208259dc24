// Finding the daemons `ckptfs` starts: ckptfs-meta, ckptfs-storage and
// ckptfs-fuse live beside the `ckptfs` executable (build/bin, or wherever
// they were installed together). The environment variable CKPTFS_BIN_DIR,
// when set, names another directory. Thread-safe.
#ifndef CKPTFS_TOOLS_DAEMON_BINARIES_H_
#define CKPTFS_TOOLS_DAEMON_BINARIES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs::tools {

inline constexpr char kMetaBinary[] = "ckptfs-meta";
inline constexpr char kStorageBinary[] = "ckptfs-storage";
inline constexpr char kFuseBinary[] = "ckptfs-fuse";

// The directory searched: $CKPTFS_BIN_DIR, else the directory of
// /proc/self/exe.
std::string DaemonBinaryDir();

// The absolute path of executable `name` in DaemonBinaryDir(), or NotFound
// with a message saying how to fix it.
absl::StatusOr<std::string> FindDaemonBinary(absl::string_view name);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_DAEMON_BINARIES_H_
