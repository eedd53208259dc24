// See target.h.
#include "bench/target.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "common/errno_status.h"
#include "tools/mounts.h"

namespace ckptfs::bench {

Target::Target() = default;
Target::~Target() {
  executor.reset();  // its RankIo objects borrow the client
  client.reset();
}

std::optional<tools::MountEntry> MountIn(absl::string_view mountinfo, const std::string& path) {
  std::optional<tools::MountEntry> best;
  for (tools::MountEntry& entry : tools::ParseMountInfo(mountinfo)) {
    const std::string& mp = entry.mount_point;
    const bool contains =
        mp == "/" || path == mp ||
        (absl::StartsWith(path, mp) && path.size() > mp.size() && path[mp.size()] == '/');
    // Later entries are mounted on top of earlier ones at the same place.
    if (contains && (!best.has_value() || mp.size() >= best->mount_point.size())) {
      best = std::move(entry);
    }
  }
  return best;
}

std::optional<tools::MountEntry> MountOf(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return MountIn(text.str(), path);
}

absl::StatusOr<std::unique_ptr<Target>> OpenDirTarget(const std::string& label,
                                                      const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return ErrnoStatus(err, absl::StrCat("directory ", path, " does not exist"));
    }
    return SyscallError(err, absl::StrCat("stat ", path));
  }
  if (!S_ISDIR(st.st_mode)) {
    return ErrnoStatus(ENOTDIR, absl::StrCat(path, " is not a directory"));
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    return SyscallError(errno, absl::StrCat("directory ", path, " is not writable"));
  }
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return SyscallError(errno, absl::StrCat("realpath ", path));
  }
  auto target = std::make_unique<Target>();
  target->label = label;
  target->path = path;
  target->root = resolved;
  if (std::optional<tools::MountEntry> mount = MountOf(target->root); mount.has_value()) {
    target->fs_type = mount->fs_type;
    target->mount_point = mount->mount_point;
  }
  target->is_ckptfs = target->fs_type == "fuse.ckptfs";
  if (!target->is_ckptfs) {
    // A ckptfs mount answers the checkpoint state attribute.
    char value[64];
    target->is_ckptfs =
        ::getxattr(target->root.c_str(), "user.ckptfs.state", value, sizeof(value)) >= 0;
  }
  target->executor = MakeProcessExecutor(target->root);
  return target;
}

absl::StatusOr<std::unique_ptr<Target>> OpenNativeTarget(const std::string& label,
                                                         const std::string& meta_address,
                                                         const std::string& path, int threads) {
  client::ClientOptions options;
  options.meta_address = meta_address;
  absl::StatusOr<std::unique_ptr<client::Client>> connected = client::Client::Connect(options);
  if (!connected.ok()) {
    return absl::Status(
        connected.status().code(),
        absl::StrCat("connecting to ckptfs at ", meta_address, ": ", connected.status().message()));
  }
  auto target = std::make_unique<Target>();
  target->label = label;
  target->path = path;
  target->root = path;
  target->native = true;
  target->meta_address = meta_address;
  target->fs_type = "ckptfs (libckptfs)";
  target->is_ckptfs = true;
  target->client = std::move(*connected);
  client::Client* client = target->client.get();
  const std::string root = path;
  target->executor =
      MakeThreadExecutor([client, root] { return MakeNativeRankIo(client, root); }, threads);
  return target;
}

}  // namespace ckptfs::bench
