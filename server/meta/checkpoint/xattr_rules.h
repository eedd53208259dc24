// The user.ckptfs.* extended attributes the metadata service stores, and the
// rules SetXattr / RemoveXattr apply to them.
//
// Of the user.ckptfs. names only these are stored xattrs: chunk_size,
// replicas and ec (see namespace.h), commit_timeout_s (a checkpoint's
// barrier timeout, on the checkpoint directory or its run directory), keep
// (how many committed checkpoints a run directory keeps) and latest_name
// (the name of a run directory's `latest` symlink, or "" for none; see
// latest.h). Every other user.ckptfs. name is reserved for the mount's
// checkpoint interface (ranks, commit, remove, state, info, ...) and
// refused with EINVAL if it ever reaches the service.
//
// Thread-safety: pure functions.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_XATTR_RULES_H_
#define CKPTFS_SERVER_META_CHECKPOINT_XATTR_RULES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/reserved_xattrs.h"

namespace ckptfs::meta {

// A positive decimal that fits in 32 bits: digits only, optionally followed
// by one "\n" (what `echo` writes). nullopt for anything else, 0 included.
std::optional<uint32_t> ParsePositiveDecimal(absl::string_view text);

// EINVAL for a reserved user.ckptfs. name (SetXattr and RemoveXattr).
absl::Status ValidateXattrNameNotReserved(absl::string_view name);

// EINVAL when `name` is commit_timeout_s or keep and `value` is not a
// positive decimal, or latest_name and `value` is not ParseLatestName's.
// Other names pass.
absl::Status ValidateCheckpointXattrValue(absl::string_view name, absl::string_view value);

// The name a user.ckptfs.latest_name value gives the symlink, nullopt for
// "" (no symlink): one trailing "\n" is dropped (what `echo` writes); the
// rest must be a valid file name (no '/' or NUL, not "." or "..", 1..255
// bytes, UTF-8 like every stored name). EINVAL naming the rule otherwise.
absl::StatusOr<std::optional<std::string>> ParseLatestName(absl::string_view value);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_XATTR_RULES_H_
