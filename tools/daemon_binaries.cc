// See daemon_binaries.h.
#include "tools/daemon_binaries.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/state_dir.h"

namespace ckptfs::tools {

std::string DaemonBinaryDir() {
  if (const char* dir = std::getenv("CKPTFS_BIN_DIR"); dir != nullptr && *dir != '\0') {
    return AbsolutePath(dir);
  }
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string exe(buf, static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == 0 ? "/" : exe.substr(0, slash);
}

absl::StatusOr<std::string> FindDaemonBinary(absl::string_view name) {
  const std::string dir = DaemonBinaryDir();
  const std::string path = absl::StrCat(dir, "/", name);
  if (::access(path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot find the executable ", name, " in ", dir,
                                            " (build it, e.g. `make ", name,
                                            "`, or set CKPTFS_BIN_DIR to the "
                                            "directory that holds it)"));
  }
  return path;
}

}  // namespace ckptfs::tools
