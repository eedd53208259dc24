// See entry_name.h.
#include "common/entry_name.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace ckptfs {

absl::Status ValidateName(absl::string_view name) {
  if (name.size() > kMaxNameLength) {
    return ErrnoStatus(ENAMETOOLONG,
                       absl::StrCat("name of ", name.size(), " bytes exceeds ", kMaxNameLength));
  }
  if (name.empty() || name == "." || name == "..") {
    return ErrnoStatus(EINVAL, absl::StrCat("invalid name \"", name, "\""));
  }
  if (name.find('/') != absl::string_view::npos || name.find('\0') != absl::string_view::npos) {
    return ErrnoStatus(EINVAL, "invalid name: contains '/' or NUL");
  }
  return absl::OkStatus();
}

}  // namespace ckptfs
