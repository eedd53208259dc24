// See xattr_rules.h.
#include "server/meta/checkpoint/xattr_rules.h"

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

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
      name == kCommitTimeoutXattr || name == kKeepXattr || name == kLatestNameXattr) {
    return absl::OkStatus();
  }
  return ErrnoStatus(EINVAL, absl::StrCat("xattr \"", name,
                                          "\" is reserved for checkpoints; the stored "
                                          "user.ckptfs. names are chunk_size, replicas, ec, "
                                          "commit_timeout_s, keep and latest_name"));
}

absl::StatusOr<std::optional<std::string>> ParseLatestName(absl::string_view value) {
  absl::string_view name = value;
  if (absl::EndsWith(name, "\n")) name.remove_suffix(1);
  if (name.empty()) return std::optional<std::string>();
  if (absl::Status valid = ValidateNewName(name); !valid.ok()) {
    return ErrnoStatus(EINVAL, absl::StrCat(kLatestNameXattr, " \"", absl::CHexEscape(value),
                                            "\": ", valid.message(),
                                            "; it must be a file name in the run directory "
                                            "(no '/', not \".\" or \"..\"), or empty for no "
                                            "latest symlink"));
  }
  return std::optional<std::string>(std::string(name));
}

absl::Status ValidateCheckpointXattrValue(absl::string_view name, absl::string_view value) {
  if (name == kLatestNameXattr) return ParseLatestName(value).status();
  if (name != kCommitTimeoutXattr && name != kKeepXattr) return absl::OkStatus();
  if (!ParsePositiveDecimal(value).has_value()) {
    return ErrnoStatus(EINVAL, absl::StrCat(name, " must be a positive decimal number, not \"",
                                            absl::CHexEscape(value), "\""));
  }
  return absl::OkStatus();
}

}  // namespace ckptfs::meta
