// See mounts.h.
#include "tools/mounts.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "tools/process.h"

namespace ckptfs::tools {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '3' &&
        text[i + 2] >= '0' && text[i + 2] <= '7' && text[i + 3] >= '0' && text[i + 3] <= '7') {
      out.push_back(static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 +
                                      (text[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

bool IsUnder(absl::string_view path, absl::string_view mount_point) {
  if (path == mount_point) return true;
  if (mount_point == "/") return true;
  return absl::StartsWith(path, mount_point) && path.size() > mount_point.size() &&
         path[mount_point.size()] == '/';
}

std::string ReadLink(const std::string& path) {
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

bool MountEntry::is_fuse() const {
  return fs_type == "fuse" || absl::StartsWith(fs_type, "fuse.") || fs_type == "fuseblk";
}

std::vector<MountEntry> ParseMountInfo(absl::string_view text) {
  std::vector<MountEntry> entries;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (fields.size() < 6 || dash + 2 >= fields.size()) continue;
    MountEntry entry;
    entry.mount_point = Unescape(fields[4]);
    entry.fs_type = Unescape(fields[dash + 1]);
    entry.source = Unescape(fields[dash + 2]);
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::optional<MountEntry> FindMount(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream text;
  text << in.rdbuf();
  std::optional<MountEntry> found;
  for (MountEntry& entry : ParseMountInfo(text.str())) {
    if (entry.mount_point == path) found = std::move(entry);  // last one is on top
  }
  return found;
}

absl::Status FuseUnmount(const std::string& path, bool lazy) {
  std::vector<std::string> argv = {"fusermount3", "-u"};
  if (lazy) argv.push_back("-z");
  argv.push_back(path);
  absl::StatusOr<CommandResult> result = RunCommand(argv);
  if (!result.ok()) return result.status();
  if (result->exit_status != 0) {
    std::string message(absl::StripAsciiWhitespace(result->output));
    const int err = absl::StrContains(message, "busy") ? EBUSY : EIO;
    return ErrnoStatus(
        err, absl::StrCat("fusermount3 -u", lazy ? " -z " : " ", path, " failed: ", message));
  }
  return absl::OkStatus();
}

std::vector<MountHolder> FindMountHolders(const std::string& mount_point) {
  std::vector<MountHolder> holders;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return holders;
  const pid_t self = ::getpid();
  while (struct dirent* entry = ::readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid == self) continue;
    const std::string base = absl::StrCat("/proc/", pid);
    std::vector<std::string> uses;
    for (const char* link : {"cwd", "root", "exe"}) {
      if (IsUnder(ReadLink(base + "/" + link), mount_point)) uses.push_back(link);
    }
    if (DIR* fds = ::opendir((base + "/fd").c_str())) {
      while (struct dirent* fd = ::readdir(fds)) {
        if (fd->d_name[0] == '.') continue;
        const std::string target = ReadLink(base + "/fd/" + fd->d_name);
        if (IsUnder(target, mount_point)) {
          uses.push_back(absl::StrCat("fd ", fd->d_name, " -> ", target));
        }
      }
      ::closedir(fds);
    }
    std::ifstream maps(base + "/maps");
    std::string line;
    std::string last_mapped;
    while (std::getline(maps, line)) {
      const size_t slash = line.find('/');
      if (slash == std::string::npos) continue;
      const std::string path = line.substr(slash);
      if (path != last_mapped && IsUnder(path, mount_point)) {
        uses.push_back("mmap " + path);
        last_mapped = path;
      }
    }
    if (uses.empty()) continue;
    holders.push_back(MountHolder{pid, ReadFirstLine(base + "/comm"), absl::StrJoin(uses, ", ")});
  }
  ::closedir(proc);
  return holders;
}

absl::StatusOr<UnmountResult> UnmountWithRetries(
    const std::string& mount_point, int attempts, bool lazy,
    const std::function<void(const std::string&)>& report) {
  absl::Status last;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) absl::SleepFor(absl::Seconds(1));
    std::optional<MountEntry> mount = FindMount(mount_point);
    if (!mount.has_value() || !mount->is_fuse()) {
      return attempt == 0 ? UnmountResult::kNotMounted : UnmountResult::kUnmounted;
    }
    last = FuseUnmount(mount_point, /*lazy=*/false);
    if (last.ok()) return UnmountResult::kUnmounted;
    if (ErrnoFromStatus(last) != EBUSY) return last;
    if (attempt == 0) report(absl::StrCat(mount_point, " is busy; retrying"));
  }
  std::vector<MountHolder> holders = FindMountHolders(mount_point);
  if (holders.empty()) {
    report(absl::StrCat(mount_point, " is still busy (no process found holding it)"));
  } else {
    report(absl::StrCat(mount_point, " is still busy; held by:"));
    for (const MountHolder& h : holders) {
      report(absl::StrCat("  pid ", h.pid, " (", h.command, "): ", h.what));
    }
  }
  if (!lazy) return last;
  report(absl::StrCat("WARNING: detaching ", mount_point,
                      " lazily (fusermount3 -u -z); the processes above keep "
                      "their open files until they close them"));
  if (absl::Status s = FuseUnmount(mount_point, /*lazy=*/true); !s.ok()) return s;
  return UnmountResult::kDetachedLazily;
}

}  // namespace ckptfs::tools
