// See checkpoint_xattr_parsing.h.
#include "client/checkpoint_xattr_parsing.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/entry_name.h"
#include "common/errno_status.h"

namespace ckptfs::client {
namespace {

// The value without one trailing "\n".
absl::string_view StripNewline(absl::string_view value) {
  if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
  return value;
}

// Plain decimal digits only: SimpleAtoi alone would take "+5", " 5" and "5 ".
absl::StatusOr<uint64_t> ParseDecimal(absl::string_view value, absl::string_view what) {
  const absl::string_view digits = StripNewline(value);
  uint64_t parsed = 0;
  if (digits.empty() || digits.size() > 19 ||
      !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &parsed)) {
    return ErrnoStatus(EINVAL, absl::StrCat(what, " must be a decimal number, not \"",
                                            absl::CEscape(value), "\""));
  }
  return parsed;
}

}  // namespace

CheckpointXattr ClassifyCheckpointXattr(absl::string_view name) {
  if (name == kRanksXattr) return CheckpointXattr::kRanks;
  if (name == kCommitXattr) return CheckpointXattr::kCommit;
  if (absl::StartsWith(name, kCommitRankXattrPrefix)) return CheckpointXattr::kCommitRank;
  if (name == kRemoveXattr) return CheckpointXattr::kRemove;
  if (name == kStateXattr) return CheckpointXattr::kState;
  if (name == kInfoXattr) return CheckpointXattr::kInfo;
  if (name == kCheckpointsXattr) return CheckpointXattr::kCheckpoints;
  if (name == kLatestXattr) return CheckpointXattr::kLatest;
  return CheckpointXattr::kNone;
}

absl::StatusOr<uint32_t> ParseCheckpointRanks(absl::string_view value) {
  absl::StatusOr<uint64_t> ranks = ParseDecimal(value, "the number of ranks");
  if (!ranks.ok()) return ranks.status();
  if (*ranks < 1 || *ranks > kMaxCheckpointRanks) {
    return ErrnoStatus(EINVAL, absl::StrCat("the number of ranks must be 1..", kMaxCheckpointRanks,
                                            ", not ", *ranks));
  }
  return static_cast<uint32_t>(*ranks);
}

absl::StatusOr<uint32_t> ParseCheckpointRank(absl::string_view value) {
  absl::StatusOr<uint64_t> rank = ParseDecimal(value, "a rank");
  if (!rank.ok()) return rank.status();
  if (*rank > UINT32_MAX) {
    return ErrnoStatus(EINVAL, absl::StrCat("rank ", *rank, " is out of range"));
  }
  return static_cast<uint32_t>(*rank);
}

absl::StatusOr<uint32_t> ParseCommitRankXattr(absl::string_view name) {
  absl::string_view rank = name;
  if (!absl::ConsumePrefix(&rank, kCommitRankXattrPrefix) || rank.empty() || rank.back() == '\n') {
    return ErrnoStatus(EINVAL, absl::StrCat("\"", absl::CEscape(name), "\" is not ",
                                            kCommitRankXattrPrefix, "<rank>"));
  }
  return ParseCheckpointRank(rank);
}

absl::StatusOr<std::string> ParseCheckpointName(absl::string_view value) {
  const absl::string_view name = StripNewline(value);
  if (absl::Status status = ValidateName(name); !status.ok()) {
    return ErrnoStatus(
        ErrnoFromStatus(status),
        absl::StrCat("checkpoint name \"", absl::CEscape(value), "\": ", status.message()));
  }
  return std::string(name);
}

absl::StatusOr<CheckpointRemoval> ParseCheckpointRemoval(absl::string_view value) {
  const absl::string_view text = StripNewline(value);
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos) {
    absl::StatusOr<std::string> name = ParseCheckpointName(value);
    if (!name.ok()) return name.status();
    return CheckpointRemoval{*std::move(name)};
  }
  auto bad = [&](absl::string_view why) {
    return ErrnoStatus(EINVAL, absl::StrCat("user.ckptfs.remove \"", absl::CEscape(value),
                                            "\": ", why, " (want NAME or NAME/INO/STATE)"));
  };
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  if (parts.size() != 3) return bad("not NAME/INO/STATE");
  absl::StatusOr<std::string> name = ParseCheckpointName(parts[0]);
  if (!name.ok()) return name.status();
  CheckpointRemoval removal{*std::move(name)};
  if (!absl::SimpleAtoi(parts[1], &removal.expected_ino) || removal.expected_ino == 0) {
    return bad("INO is not an inode number");
  }
  for (meta::CheckpointState state :
       {meta::PENDING, meta::COMMITTED, meta::ABORTED, meta::REMOVING}) {
    if (parts[2] == CheckpointStateName(state)) removal.expected_state = state;
  }
  if (removal.expected_state == meta::CHECKPOINT_STATE_UNSPECIFIED) {
    return bad("STATE is not pending, committed, aborted or removing");
  }
  return removal;
}

}  // namespace ckptfs::client
