// Validation of a single path component, shared by the metadata service
// (which enforces it) and the client (which fails early with the same
// errno). Thread-safe (pure functions).
#ifndef CKPTFS_COMMON_ENTRY_NAME_H_
#define CKPTFS_COMMON_ENTRY_NAME_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ckptfs {

inline constexpr size_t kMaxNameLength = 255;

// OK for a valid directory entry name. ENAMETOOLONG over 255 bytes; EINVAL
// for "", ".", "..", or a name containing '/' or NUL.
absl::Status ValidateName(absl::string_view name);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_ENTRY_NAME_H_
