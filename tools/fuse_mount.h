// Starting a ckptfs FUSE mount the robust way: `ckptfs-fuse --foreground`
// run detached by us (so we know its pid and own its log), then polling the
// mount table until the mount appears, watching that the daemon is still
// alive. Used by `ckptfs up` and `ckptfs mount`. Thread-compatible.
#ifndef CKPTFS_TOOLS_FUSE_MOUNT_H_
#define CKPTFS_TOOLS_FUSE_MOUNT_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ckptfs::tools {

struct FuseMountOptions {
  std::string fuse_binary;      // absolute path of ckptfs-fuse
  std::string meta_address;     // host:port
  std::string mountpoint;       // absolute
  int threads = 0;              // 0: the daemon's default
  std::string credential_file;  // --credential_file; "" for none
};

// The command line that runs ckptfs-fuse in the foreground for `options`.
std::vector<std::string> FuseArgv(const FuseMountOptions& options);

// Creates `mountpoint` (and parents) if missing. FailedPrecondition when a
// FUSE filesystem is already mounted there, or when it is not a directory.
absl::Status PrepareMountpoint(const std::string& mountpoint);

// Waits until a FUSE filesystem is mounted at `mountpoint`. Fails early if
// `pid` (our child, the ckptfs-fuse daemon) exits first, saying how.
absl::Status WaitForMount(pid_t pid, const std::string& mountpoint, absl::Duration timeout);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_FUSE_MOUNT_H_
