// See xattr_names.h.
#include "fuse/xattr_names.h"

#include "absl/strings/match.h"

namespace ckptfs::fuse {

bool IsStoredXattrName(absl::string_view name) {
  return absl::StartsWith(name, "user.") || absl::StartsWith(name, "trusted.");
}

std::string PackXattrNames(const std::vector<std::string>& names) {
  std::string packed;
  for (const std::string& name : names) {
    packed.append(name);
    packed.push_back('\0');
  }
  return packed;
}

}  // namespace ckptfs::fuse
