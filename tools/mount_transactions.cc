// See mount_transactions.h.
#include "tools/mount_transactions.h"

#include <string.h>
#include <sys/vfs.h>
#include <sys/xattr.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"

namespace ckptfs::tools {
namespace {

absl::Status XattrError(int err, const std::string& path) {
  return ErrnoStatus(err, absl::StrCat(path, ": ", ErrnoText(err)));
}

}  // namespace

absl::Status CheckOnCkptfs(const std::string& path) {
  constexpr long kFuseSuperMagic = 0x65735546;
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return XattrError(errno, path);
  if (static_cast<long>(fs.f_type) != kFuseSuperMagic) {
    return ErrnoStatus(ENOTSUP, absl::StrCat(path,
                                             " is not on a ckptfs mount (mount one with "
                                             "`ckptfs mount` or `ckptfs up`)"));
  }
  return absl::OkStatus();
}

std::string ErrnoText(int err) {
  const char* name = ::strerrorname_np(err);
  return absl::StrCat(::strerror(err), " (", name != nullptr ? name : absl::StrCat("errno ", err),
                      ")");
}

absl::StatusOr<std::string> ReadXattr(const std::string& path, const char* name) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    const ssize_t size = ::getxattr(path.c_str(), name, nullptr, 0);
    if (size < 0) {
      if (errno == EINTR) continue;
      return XattrError(errno, path);
    }
    std::string value(static_cast<size_t>(size), '\0');
    const ssize_t got = ::getxattr(path.c_str(), name, value.data(), value.size());
    if (got >= 0) {
      value.resize(static_cast<size_t>(got));
      return value;
    }
    if (errno != ERANGE && errno != EINTR) return XattrError(errno, path);
    // The value grew between the two calls: ask for its size again.
  }
  return XattrError(ERANGE, path);
}

absl::Status WriteXattr(const std::string& path, const char* name, absl::string_view value) {
  while (::setxattr(path.c_str(), name, value.data(), value.size(), 0) != 0) {
    if (errno != EINTR) return XattrError(errno, path);
  }
  return absl::OkStatus();
}

absl::Status CommitRank(const std::string& dir, uint64_t rank) {
  const std::string name = absl::StrCat(kCommitRankXattrPrefix, rank);
  char value[256];
  while (::getxattr(dir.c_str(), name.c_str(), value, sizeof(value)) < 0) {
    if (errno != EINTR) return XattrError(errno, dir);
  }
  return absl::OkStatus();
}

std::string FormatAge(int64_t ms) {
  const int64_t s = ms < 0 ? 0 : ms / 1000;
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 120 * 60) return absl::StrCat(s / 60, "m");
  if (s < 48 * 3600) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

}  // namespace ckptfs::tools
