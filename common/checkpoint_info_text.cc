// See checkpoint_info_text.h.
#include "common/checkpoint_info_text.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"

namespace ckptfs {
namespace {

bool NeedsEscape(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\\' || c == '='; }

std::string EscapeName(absl::string_view name) {
  std::string out;
  for (char c : name) {
    if (!NeedsEscape(c)) {
      out.push_back(c);
      continue;
    }
    const unsigned char u = static_cast<unsigned char>(c);
    out.push_back('\\');
    out.push_back(static_cast<char>('0' + ((u >> 6) & 7)));
    out.push_back(static_cast<char>('0' + ((u >> 3) & 7)));
    out.push_back(static_cast<char>('0' + (u & 7)));
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
  if (name == "removing") return meta::REMOVING;
  return meta::CHECKPOINT_STATE_UNSPECIFIED;
}

absl::Status NotAnInfoLine(absl::string_view line, absl::string_view why) {
  return ErrnoStatus(EINVAL, absl::StrCat("not a checkpoint info line (", why, "): \"",
                                          absl::CEscape(line), "\""));
}

// Sets the numeric field `key` of `info` from `value`; unknown keys are
// ignored. False if `value` is not a number.
bool SetNumber(meta::CheckpointInfo& info, absl::string_view key, absl::string_view value) {
  int64_t n = 0;
  if (key != "ranks" && key != "arrived" && key != "files" && key != "bytes" &&
      key != "declared_ms" && key != "first_commit_ms" && key != "ended_ms" && key != "timeout_s" &&
      key != "errno" && key != "ino" && key != "removing_ms") {
    return true;
  }
  if (!absl::SimpleAtoi(value, &n)) return false;
  if (key == "ranks") info.set_ranks(static_cast<uint32_t>(n));
  if (key == "arrived") info.set_arrived(static_cast<uint32_t>(n));
  if (key == "files") info.set_files(static_cast<uint64_t>(n));
  if (key == "bytes") info.set_bytes(static_cast<uint64_t>(n));
  if (key == "declared_ms") info.set_declared_ms(n);
  if (key == "first_commit_ms") info.set_first_commit_ms(n);
  if (key == "ended_ms") info.set_ended_ms(n);
  if (key == "timeout_s") info.set_timeout_s(static_cast<uint32_t>(n));
  if (key == "errno") info.set_abort_errno(static_cast<int32_t>(n));
  if (key == "ino") info.set_ino(static_cast<uint64_t>(n));
  if (key == "removing_ms") info.set_removing_ms(n);
  return true;
}

}  // namespace

std::string CheckpointStateName(meta::CheckpointState state) {
  switch (state) {
    case meta::PENDING:
      return "pending";
    case meta::COMMITTED:
      return "committed";
    case meta::ABORTED:
      return "aborted";
    case meta::REMOVING:
      return "removing";
    default:
      return "";
  }
}

std::string CheckpointRemovalValue(absl::string_view name, uint64_t ino,
                                   meta::CheckpointState state) {
  return absl::StrCat(name, "/", ino, "/", CheckpointStateName(state));
}

std::string FormatCheckpointInfo(const meta::CheckpointInfo& info) {
  std::string reason = info.abort_reason();
  std::replace(reason.begin(), reason.end(), '\n', ' ');
  return absl::StrCat(
      "name=", EscapeName(info.name()), " state=", CheckpointStateName(info.state()),
      " ranks=", info.ranks(), " arrived=", info.arrived(), " files=", info.files(),
      " bytes=", info.bytes(), " declared_ms=", info.declared_ms(),
      " first_commit_ms=", info.first_commit_ms(), " ended_ms=", info.ended_ms(),
      " timeout_s=", info.timeout_s(), " errno=", info.abort_errno(), " ino=", info.ino(),
      info.removing_ms() != 0 ? absl::StrCat(" removing_ms=", info.removing_ms()) : "",
      " reason=", reason);
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
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  meta::CheckpointInfo info;
  // `reason` is last and may hold spaces: everything after it is its value.
  absl::string_view head = line;
  if (const size_t at = line.find(" reason="); at != absl::string_view::npos) {
    head = line.substr(0, at);
    info.set_abort_reason(std::string(line.substr(at + 8)));
  } else if (absl::StartsWith(line, "reason=")) {
    head = "";
    info.set_abort_reason(std::string(line.substr(7)));
  }
  bool has_name = false;
  for (absl::string_view word : absl::StrSplit(head, ' ', absl::SkipEmpty())) {
    const size_t eq = word.find('=');
    if (eq == absl::string_view::npos) return NotAnInfoLine(line, "a word without '='");
    const absl::string_view key = word.substr(0, eq);
    const absl::string_view value = word.substr(eq + 1);
    if (key == "name") {
      info.set_name(UnescapeName(value));
      has_name = true;
    } else if (key == "state") {
      info.set_state(StateFromName(value));
      if (info.state() == meta::CHECKPOINT_STATE_UNSPECIFIED) {
        return NotAnInfoLine(line, "unknown state");
      }
    } else if (!SetNumber(info, key, value)) {
      return NotAnInfoLine(line, absl::StrCat(key, " is not a number"));
    }
  }
  if (!has_name) return NotAnInfoLine(line, "no name=");
  if (info.state() == meta::CHECKPOINT_STATE_UNSPECIFIED) return NotAnInfoLine(line, "no state=");
  return info;
}

absl::StatusOr<std::vector<meta::CheckpointInfo>> ParseCheckpointList(absl::string_view text) {
  std::vector<meta::CheckpointInfo> list;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    absl::StatusOr<meta::CheckpointInfo> info = ParseCheckpointInfo(line);
    if (!info.ok()) return info.status();
    list.push_back(*std::move(info));
  }
  return list;
}

}  // namespace ckptfs
