// See xattr_rules.h.
#include "server/meta/checkpoint/xattr_rules.h"

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/namespace.h"

namespace ckptfs::meta {

std::optional<uint32_t> ParsePositiveDecimal(absl::string_view text) {
  if (absl::EndsWith(text, "\n")) text.remove_suffix(1);
  if (text.empty() || text.size() > 10) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value == 0 || value > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(value);
}

absl::Status ValidateXattrNameNotReserved(absl::string_view name) {
  if (!absl::StartsWith(name, kCkptfsXattrPrefix)) return absl::OkStatus();
  if (name == kChunkSizeXattr || name == kReplicasXattr || name == kErasureCodeXattr ||
      name == kCommitTimeoutXattr || name == kKeepXattr) {
    return absl::OkStatus();
  }
  return ErrnoStatus(EINVAL, absl::StrCat("xattr \"", name,
                                          "\" is reserved for checkpoints; the stored "
                                          "user.ckptfs. names are chunk_size, replicas, ec, "
                                          "commit_timeout_s and keep"));
}

absl::Status ValidateCheckpointXattrValue(absl::string_view name, absl::string_view value) {
  if (name != kCommitTimeoutXattr && name != kKeepXattr) return absl::OkStatus();
  if (!ParsePositiveDecimal(value).has_value()) {
    return ErrnoStatus(EINVAL, absl::StrCat(name, " must be a positive decimal number, not \"",
                                            absl::CHexEscape(value), "\""));
  }
  return absl::OkStatus();
}

}  // namespace ckptfs::meta
