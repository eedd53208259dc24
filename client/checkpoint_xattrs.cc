// See checkpoint_xattrs.h.
#include "client/checkpoint_xattrs.h"

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"
#include "common/names.h"

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

// Names may hold any byte but '/' and NUL; the info line escapes those that
// would break it (space, newline, tab, backslash, '=') as \ooo, like
// /proc/mounts.
std::string EscapeName(absl::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\\' || c == '=') {
      const unsigned char u = static_cast<unsigned char>(c);
      out.push_back('\\');
      out.push_back(static_cast<char>('0' + ((u >> 6) & 7)));
      out.push_back(static_cast<char>('0' + ((u >> 3) & 7)));
      out.push_back(static_cast<char>('0' + (u & 7)));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool IsOctal(char c) { return c >= '0' && c <= '7'; }

std::string UnescapeName(absl::string_view escaped) {
  std::string out;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '\\' && i + 3 < escaped.size() && IsOctal(escaped[i + 1]) &&
        IsOctal(escaped[i + 2]) && IsOctal(escaped[i + 3])) {
      out.push_back(static_cast<char>((escaped[i + 1] - '0') * 64 + (escaped[i + 2] - '0') * 8 +
                                      (escaped[i + 3] - '0')));
      i += 3;
      continue;
    }
    out.push_back(escaped[i]);
  }
  return out;
}

meta::CheckpointState StateFromName(absl::string_view name) {
  if (name == "pending") return meta::PENDING;
  if (name == "committed") return meta::COMMITTED;
  if (name == "aborted") return meta::ABORTED;
  return meta::CHECKPOINT_STATE_UNSPECIFIED;
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
    return ErrnoStatus(EINVAL, absl::StrCat("the number of ranks must be 1..",
                                            kMaxCheckpointRanks, ", not ", *ranks));
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
  if (!absl::ConsumePrefix(&rank, kCommitRankXattrPrefix) || rank.empty() ||
      rank.back() == '\n') {
    return ErrnoStatus(EINVAL, absl::StrCat("\"", absl::CEscape(name), "\" is not ",
                                            kCommitRankXattrPrefix, "<rank>"));
  }
  return ParseCheckpointRank(rank);
}

absl::StatusOr<std::string> ParseCheckpointName(absl::string_view value) {
  const absl::string_view name = StripNewline(value);
  if (absl::Status status = ValidateName(name); !status.ok()) {
    return ErrnoStatus(ErrnoFromStatus(status),
                       absl::StrCat("checkpoint name \"", absl::CEscape(value),
                                    "\": ", status.message()));
  }
  return std::string(name);
}

std::string CheckpointStateName(meta::CheckpointState state) {
  switch (state) {
    case meta::PENDING: return "pending";
    case meta::COMMITTED: return "committed";
    case meta::ABORTED: return "aborted";
    default: return "";
  }
}

std::string FormatCheckpointInfo(const meta::CheckpointInfo& info) {
  std::string reason = info.abort_reason();
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  return absl::StrCat(
      "name=", EscapeName(info.name()), " state=", CheckpointStateName(info.state()),
      " ranks=", info.ranks(), " arrived=", info.arrived(), " files=", info.files(),
      " bytes=", info.bytes(), " declared_ms=", info.declared_ms(),
      " first_commit_ms=", info.first_commit_ms(), " ended_ms=", info.ended_ms(),
      " timeout_s=", info.timeout_s(), " errno=", info.abort_errno(), " reason=", reason);
}

std::string FormatCheckpointList(const meta::ListCheckpointsReply& reply) {
  std::vector<const meta::CheckpointInfo*> sorted;
  for (const meta::CheckpointInfo& info : reply.checkpoints()) sorted.push_back(&info);
  std::sort(sorted.begin(), sorted.end(),
            [](const meta::CheckpointInfo* a, const meta::CheckpointInfo* b) {
              return a->name() < b->name();
            });
  std::string out;
  for (const meta::CheckpointInfo* info : sorted) {
    absl::StrAppend(&out, FormatCheckpointInfo(*info), "\n");
  }
  return out;
}

absl::StatusOr<meta::CheckpointInfo> ParseCheckpointInfo(absl::string_view line) {
  line = StripNewline(line);
  auto bad = [&](absl::string_view why) {
    return ErrnoStatus(EINVAL, absl::StrCat("not a checkpoint info line (", why, "): \"",
                                            absl::CEscape(line), "\""));
  };
  const size_t reason_at = line.find(" reason=");
  if (reason_at == absl::string_view::npos) return bad("no reason=");
  meta::CheckpointInfo info;
  info.set_abort_reason(std::string(line.substr(reason_at + 8)));
  const std::vector<absl::string_view> fields =
      absl::StrSplit(line.substr(0, reason_at), ' ');
  static constexpr absl::string_view kKeys[] = {
      "name", "state", "ranks", "arrived", "files", "bytes", "declared_ms",
      "first_commit_ms", "ended_ms", "timeout_s", "errno"};
  if (fields.size() != sizeof(kKeys) / sizeof(kKeys[0])) return bad("wrong number of fields");
  for (size_t i = 0; i < fields.size(); ++i) {
    const size_t eq = fields[i].find('=');
    if (eq == absl::string_view::npos || fields[i].substr(0, eq) != kKeys[i]) {
      return bad(absl::StrCat("expected ", kKeys[i], "="));
    }
    const absl::string_view value = fields[i].substr(eq + 1);
    if (i == 0) {
      info.set_name(UnescapeName(value));
      continue;
    }
    if (i == 1) {
      info.set_state(StateFromName(value));
      if (info.state() == meta::CHECKPOINT_STATE_UNSPECIFIED) return bad("unknown state");
      continue;
    }
    int64_t number = 0;
    if (!absl::SimpleAtoi(value, &number)) return bad(absl::StrCat(kKeys[i], " not a number"));
    switch (i) {
      case 2: info.set_ranks(static_cast<uint32_t>(number)); break;
      case 3: info.set_arrived(static_cast<uint32_t>(number)); break;
      case 4: info.set_files(static_cast<uint64_t>(number)); break;
      case 5: info.set_bytes(static_cast<uint64_t>(number)); break;
      case 6: info.set_declared_ms(number); break;
      case 7: info.set_first_commit_ms(number); break;
      case 8: info.set_ended_ms(number); break;
      case 9: info.set_timeout_s(static_cast<uint32_t>(number)); break;
      default: info.set_abort_errno(static_cast<int32_t>(number)); break;
    }
  }
  return info;
}

}  // namespace ckptfs::client
