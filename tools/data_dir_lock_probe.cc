// See data_dir_lock_probe.h.
#include "tools/data_dir_lock_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/unique_fd.h"
#include "tools/process.h"

namespace ckptfs::tools {
namespace {

std::string LockPath(const std::string& data_dir) { return data_dir + "/LOCK"; }

// The pids /proc/locks names as holding a lock on inode `ino` (waiters, the
// "->" lines, and OFD locks, which show pid -1, left out). Matched by inode
// number only: the device number /proc/locks prints may differ from stat's
// on stacked file systems, and every pid is checked against its open files.
std::vector<pid_t> LockTablePids(ino_t ino) {
  std::vector<pid_t> pids;
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    // "17: FLOCK  ADVISORY  WRITE 29347 fe:00:10952950 0 EOF"
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 6 || fields[1] == "->") continue;
    std::vector<absl::string_view> id = absl::StrSplit(fields[5], ':');
    pid_t pid = 0;
    uint64_t lock_ino = 0;
    if (id.size() != 3 || !absl::SimpleAtoi(id[2], &lock_ino) || lock_ino != ino ||
        !absl::SimpleAtoi(fields[4], &pid) || pid <= 0) {
      continue;
    }
    pids.push_back(pid);
  }
  return pids;
}

// Whether `pid` has the file `target` open now.
bool HasOpen(pid_t pid, const struct stat& target) {
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  DIR* fds = ::opendir(dir.c_str());
  if (fds == nullptr) return false;
  bool found = false;
  while (struct dirent* entry = ::readdir(fds)) {
    if (entry->d_name[0] == '.') continue;
    struct stat st {};
    if (::stat(absl::StrCat(dir, "/", entry->d_name).c_str(), &st) == 0 &&
        st.st_dev == target.st_dev && st.st_ino == target.st_ino) {
      found = true;
      break;
    }
  }
  ::closedir(fds);
  return found;
}

}  // namespace

absl::StatusOr<bool> DataDirLocked(const std::string& data_dir) {
  const std::string path = LockPath(data_dir);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return false;  // no LOCK (or no directory): never claimed
    return SyscallError(errno, absl::StrCat("open ", path));
  }
  // The server's OFD read lock (or anyone's record lock) conflicts with a
  // write lock; asking takes nothing.
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 0;
  probe.l_len = 0;  // the whole file
  if (::fcntl(fd.get(), F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK) return true;
  // Every server holds the flock (the OFD lock is best effort): a shared one
  // cannot be had while it does. Ours goes with `fd`.
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return true;
    return SyscallError(errno, absl::StrCat("flock ", path));
  }
  return false;
}

std::vector<pid_t> DataDirLockHolders(const std::string& data_dir) {
  const std::string path = LockPath(data_dir);
  struct stat lock {};
  if (::stat(path.c_str(), &lock) != 0) return {};
  std::vector<pid_t> candidates = LockTablePids(lock.st_ino);
  // The pid the server wrote into LOCK, for a kernel that shows no pids.
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  pid_t written = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text.str()), &written) && written > 0) {
    candidates.push_back(written);
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<pid_t> holders;
  const pid_t self = ::getpid();
  for (pid_t pid : candidates) {
    if (pid != self && HasOpen(pid, lock)) holders.push_back(pid);
  }
  return holders;
}

absl::StatusOr<std::vector<pid_t>> EnsureDataDirReleased(const std::string& data_dir,
                                                         absl::Duration grace) {
  absl::StatusOr<bool> locked = DataDirLocked(data_dir);
  if (!locked.ok()) return locked.status();
  if (!*locked) return std::vector<pid_t>();
  const std::string path = LockPath(data_dir);
  std::vector<pid_t> pids = DataDirLockHolders(data_dir);
  if (pids.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is locked, so a ckptfs-storage still runs on ", data_dir,
        ", but no process this user may see holds it; stop it by hand (`fuser ", path,
        "` names it)"));
  }
  std::vector<ProcessRecord> records;
  for (pid_t pid : pids) {
    if (absl::StatusOr<ProcessRecord> record = CurrentProcessRecord(pid); record.ok()) {
      records.push_back(*record);
    }
  }
  std::vector<StopOutcome> outcomes = StopProcesses(records, grace);
  // The kernel drops the locks as the holders exit; allow it a moment.
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  while (true) {
    locked = DataDirLocked(data_dir);
    if (!locked.ok()) return locked.status();
    if (!*locked) return pids;
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::vector<std::string> what;
  for (size_t i = 0; i < records.size(); ++i) {
    what.push_back(absl::StrCat("pid ", records[i].pid, ": ", StopOutcomeName(outcomes[i])));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      path, " is still locked, so a ckptfs-storage still runs on ", data_dir, " (",
      what.empty() ? absl::StrCat("pid ", absl::StrJoin(pids, ", "), " exited meanwhile")
                   : absl::StrJoin(what, "; "),
      ")"));
}

}  // namespace ckptfs::tools
