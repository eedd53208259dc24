// See fuse_mount.h.
#include "tools/fuse_mount.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "tools/interruptible_wait.h"
#include "tools/mounts.h"
#include "tools/process.h"

namespace ckptfs::tools {

std::vector<std::string> FuseArgv(const FuseMountOptions& options) {
  std::vector<std::string> argv = {options.fuse_binary, "--meta=" + options.meta_address,
                                   "--mountpoint=" + options.mountpoint, "--foreground"};
  if (options.threads > 0) argv.push_back(absl::StrCat("--threads=", options.threads));
  if (!options.credential_file.empty()) {
    argv.push_back("--credential_file=" + options.credential_file);
  }
  return argv;
}

absl::Status PrepareMountpoint(const std::string& mountpoint) {
  if (std::optional<MountEntry> mount = FindMount(mountpoint);
      mount.has_value() && mount->is_fuse()) {
    return absl::FailedPreconditionError(absl::StrCat(
        mountpoint, " is already a FUSE mount (", mount->fs_type, " from ", mount->source,
        "); unmount it first: ckptfs umount --mountpoint ", mountpoint));
  }
  std::error_code ec;
  std::filesystem::create_directories(mountpoint, ec);
  if (ec) return SyscallError(ec.value(), absl::StrCat("create mountpoint ", mountpoint));
  struct stat st;
  if (::stat(mountpoint.c_str(), &st) != 0) {
    return SyscallError(errno, absl::StrCat("stat ", mountpoint));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("mountpoint ", mountpoint, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status WaitForMount(pid_t pid, const std::string& mountpoint, absl::Duration timeout) {
  return WaitFor(absl::StrCat("the mount at ", mountpoint), timeout, [&]() -> absl::StatusOr<bool> {
    std::optional<MountEntry> mount = FindMount(mountpoint);
    if (mount.has_value() && mount->is_fuse()) return true;
    if (std::optional<std::string> how = ReapIfExited(pid)) {
      return absl::UnavailableError(
          absl::StrCat("ckptfs-fuse (pid ", pid, ") ", *how, " before mounting ", mountpoint));
    }
    return false;
  });
}

}  // namespace ckptfs::tools
