// Mount points: is a directory a FUSE mount, unmounting one, and who keeps
// a busy one busy.
//
// The mount table is read from /proc/self/mountinfo. A ckptfs mount is any
// mount whose filesystem type starts with "fuse" ("fuse", "fuse.ckptfs"):
// the tool checks that a mountpoint is free before starting ckptfs-fuse, so
// a FUSE mount that appears there afterwards is the one it started.
// Thread-safe (no shared state).
#ifndef CKPTFS_TOOLS_MOUNTS_H_
#define CKPTFS_TOOLS_MOUNTS_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs::tools {

struct MountEntry {
  std::string mount_point;  // unescaped
  std::string fs_type;      // e.g. "fuse.ckptfs"
  std::string source;       // e.g. "ckptfs"
  bool is_fuse() const;
};

// Parses mountinfo text (proc(5)); lines that don't parse are skipped.
std::vector<MountEntry> ParseMountInfo(absl::string_view text);

// The topmost mount at exactly `path` (absolute, normalized), if any.
std::optional<MountEntry> FindMount(const std::string& path);

// Runs `fusermount3 -u [-z] path`. Error with fusermount3's message.
absl::Status FuseUnmount(const std::string& path, bool lazy);

// A process that uses something under a mountpoint.
struct MountHolder {
  pid_t pid = 0;
  std::string command;  // /proc/<pid>/comm
  std::string what;     // "cwd", "fd 3 -> /mnt/x/f", "mmap /mnt/x/f", ...
};

// Every process whose cwd, root, executable, open files or mappings lie
// under `mount_point` (best effort: processes we may not inspect are
// skipped).
std::vector<MountHolder> FindMountHolders(const std::string& mount_point);

// How UnmountWithRetries ended.
enum class UnmountResult { kNotMounted, kUnmounted, kDetachedLazily };

// Unmounts a FUSE mount: retries `fusermount3 -u` for `attempts` tries,
// one second apart, while it is busy. If it is still busy then, reports the
// processes holding it and, if `lazy` is set, detaches it with
// `fusermount3 -u -z`. `report` receives one line per notable event (busy,
// holders, lazy detach). An error when it stays mounted.
absl::StatusOr<UnmountResult> UnmountWithRetries(
    const std::string& mount_point, int attempts, bool lazy,
    const std::function<void(const std::string&)>& report);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_MOUNTS_H_
