// See ckpt_xattrs.h.
#include "tools/ckpt_xattrs.h"

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

bool IsOctal(char c) { return c >= '0' && c <= '7'; }

// Names in info lines escape space, tab, newline, '\\' and '=' as \ooo (as
// /proc/mounts does); other bytes stand for themselves.
std::string UnescapeName(absl::string_view escaped) {
  std::string out;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '\\' && i + 3 < escaped.size() && IsOctal(escaped[i + 1]) &&
        IsOctal(escaped[i + 2]) && IsOctal(escaped[i + 3])) {
      out.push_back(static_cast<char>((escaped[i + 1] - '0') * 64 + (escaped[i + 2] - '0') * 8 +
                                      (escaped[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(escaped[i]);
    }
  }
  return out;
}

}  // namespace

absl::Status CheckOnCkptfs(const std::string& path) {
  constexpr long kFuseSuperMagic = 0x65735546;
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return XattrError(errno, path);
  if (static_cast<long>(fs.f_type) != kFuseSuperMagic) {
    return ErrnoStatus(ENOTSUP, absl::StrCat(path, " is not on a ckptfs mount"));
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

absl::StatusOr<CheckpointLine> ParseCheckpointLine(absl::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  CheckpointLine info;
  // `reason` is last and may hold spaces: everything after it is its value.
  absl::string_view head = line;
  if (absl::string_view::size_type at = line.find(" reason="); at != absl::string_view::npos) {
    head = line.substr(0, at);
    info.reason = std::string(line.substr(at + 8));
  } else if (line.substr(0, 7) == "reason=") {
    head = "";
    info.reason = std::string(line.substr(7));
  }
  std::vector<std::pair<std::string, std::string>> fields;
  for (absl::string_view word : absl::StrSplit(head, ' ', absl::SkipEmpty())) {
    const absl::string_view::size_type eq = word.find('=');
    if (eq == absl::string_view::npos) {
      if (fields.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("checkpoint info: stray \"", word, "\""));
      }
      absl::StrAppend(&fields.back().second, " ", word);
      continue;
    }
    fields.emplace_back(std::string(word.substr(0, eq)), std::string(word.substr(eq + 1)));
  }
  bool has_name = false;
  bool has_state = false;
  for (const auto& [key, value] : fields) {
    bool ok = true;
    if (key == "name") {
      info.name = UnescapeName(value);
      has_name = true;
    } else if (key == "state") {
      info.state = value;
      has_state = true;
    } else if (key == "ranks") {
      ok = absl::SimpleAtoi(value, &info.ranks);
    } else if (key == "arrived") {
      ok = absl::SimpleAtoi(value, &info.arrived);
    } else if (key == "files") {
      ok = absl::SimpleAtoi(value, &info.files);
    } else if (key == "bytes") {
      ok = absl::SimpleAtoi(value, &info.bytes);
    } else if (key == "declared_ms") {
      ok = absl::SimpleAtoi(value, &info.declared_ms);
    } else if (key == "first_commit_ms") {
      ok = absl::SimpleAtoi(value, &info.first_commit_ms);
    } else if (key == "ended_ms") {
      ok = absl::SimpleAtoi(value, &info.ended_ms);
    } else if (key == "timeout_s") {
      ok = absl::SimpleAtoi(value, &info.timeout_s);
    } else if (key == "errno") {
      ok = absl::SimpleAtoi(value, &info.err);
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint info: bad number ", key, "=", value));
    }
  }
  if (!has_name || !has_state) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint info: no name= or state= in \"", line, "\""));
  }
  return info;
}

absl::StatusOr<std::vector<CheckpointLine>> ParseCheckpointList(absl::string_view text) {
  std::vector<CheckpointLine> list;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    absl::StatusOr<CheckpointLine> info = ParseCheckpointLine(line);
    if (!info.ok()) return info.status();
    list.push_back(*std::move(info));
  }
  return list;
}

std::string FormatAge(int64_t ms) {
  const int64_t s = ms < 0 ? 0 : ms / 1000;
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 120 * 60) return absl::StrCat(s / 60, "m");
  if (s < 48 * 3600) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

}  // namespace ckptfs::tools
