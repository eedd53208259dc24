// See data_dir_lock_probe.h.
#include "tools/data_dir_lock_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/unique_fd.h"
#include "tools/process.h"

namespace ckptfs::tools {
namespace {

// How long a lock may stay held with no holder in sight, and how long
// stopped holders get to let go of it.
constexpr absl::Duration kSettle = absl::Seconds(3);

std::string LockPath(const std::string& data_dir) { return data_dir + "/LOCK"; }

// Whether /proc/.../fdinfo/<fd> at `path` lists a lock taken through that fd.
bool FdInfoShowsLock(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "lock:")) return true;
  }
  return false;
}

enum class FdTable { kHoldsLock, kNoLock, kUnseen };

// Looks through the fd table under `proc_dir` ("/proc/<pid>" or
// "/proc/<pid>/task/<tid>") for an fd on `target` with a lock on it.
// kUnseen: no fd at all, or none we may see.
FdTable ScanFdTable(const std::string& proc_dir, const struct stat& target) {
  const std::string fd_dir = proc_dir + "/fd";
  DIR* fds = ::opendir(fd_dir.c_str());
  if (fds == nullptr) return FdTable::kUnseen;
  bool any = false;
  bool holds = false;
  while (struct dirent* entry = ::readdir(fds)) {
    if (entry->d_name[0] == '.') continue;
    any = true;
    const std::string fd = absl::StrCat(fd_dir, "/", entry->d_name);
    // Cheapest first, and nothing that reads another file system until the
    // fd is known to hold a lock: sockets, pipes and anonymous inodes
    // ("socket:[..]") are not LOCK; few fds hold locks; only those are
    // stat()ed (which follows the link into the file's file system).
    char link[8];
    if (::readlink(fd.c_str(), link, sizeof(link)) <= 0 || link[0] != '/') continue;
    if (!FdInfoShowsLock(absl::StrCat(proc_dir, "/fdinfo/", entry->d_name))) continue;
    struct stat st {};
    if (::stat(fd.c_str(), &st) == 0 && st.st_dev == target.st_dev && st.st_ino == target.st_ino) {
      holds = true;
      break;
    }
  }
  ::closedir(fds);
  if (holds) return FdTable::kHoldsLock;
  return any ? FdTable::kNoLock : FdTable::kUnseen;
}

// Whether `pid` holds a lock on `target` through one of its fds.
bool HoldsLock(pid_t pid, const struct stat& target) {
  const std::string proc_dir = absl::StrCat("/proc/", pid);
  const FdTable table = ScanFdTable(proc_dir, target);
  if (table != FdTable::kUnseen) return table == FdTable::kHoldsLock;
  // No fd table under the pid: its main thread may have exited (first to die
  // of a SIGKILL, say) while other threads still hold the files. Theirs
  // show under task/.
  const std::string task_dir = proc_dir + "/task";
  DIR* tasks = ::opendir(task_dir.c_str());
  if (tasks == nullptr) return false;
  bool holds = false;
  while (struct dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] == '.' || absl::StrCat(pid) == entry->d_name) continue;
    if (ScanFdTable(absl::StrCat(task_dir, "/", entry->d_name), target) == FdTable::kHoldsLock) {
      holds = true;
      break;
    }
  }
  ::closedir(tasks);
  return holds;
}

// Every pid in /proc but the caller's.
std::vector<pid_t> OtherPids() {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  const pid_t self = ::getpid();
  while (struct dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid > 0 && *end == '\0' && pid != self) pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return pids;
}

// The records of the processes that hold a lock on `path` now. Each record
// is taken before the evidence that goes with it: should the pid pass to
// another process in between, the record keeps the first one's start time
// and StopProcesses signals neither.
std::vector<ProcessRecord> HolderRecords(const std::string& path) {
  struct stat lock {};
  if (::stat(path.c_str(), &lock) != 0) return {};
  std::vector<ProcessRecord> holders;
  for (pid_t pid : OtherPids()) {
    if (!HoldsLock(pid, lock)) continue;  // the cheap pass over every process
    absl::StatusOr<ProcessRecord> record = CurrentProcessRecord(pid);
    if (record.ok() && HoldsLock(pid, lock)) holders.push_back(*std::move(record));
  }
  return holders;
}

std::string Pids(const std::vector<ProcessRecord>& records) {
  std::vector<pid_t> pids;
  for (const ProcessRecord& r : records) pids.push_back(r.pid);
  return absl::StrJoin(pids, ", ");
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
  std::vector<pid_t> pids;
  for (const ProcessRecord& r : HolderRecords(LockPath(data_dir))) pids.push_back(r.pid);
  return pids;
}

absl::StatusOr<DataDirRelease> EnsureDataDirReleased(const std::string& data_dir,
                                                     absl::Duration grace) {
  const std::string path = LockPath(data_dir);
  DataDirRelease result;
  // A holder may not show at once (a SIGKILLed server's threads still exiting
  // after its main thread, another user's process): poll a while.
  std::vector<ProcessRecord> holders;
  const absl::Time find_deadline = absl::Now() + kSettle;
  while (true) {
    absl::StatusOr<bool> locked = DataDirLocked(data_dir);
    if (!locked.ok()) return locked.status();
    if (!*locked) {
      result.released = true;
      return result;
    }
    holders = HolderRecords(path);
    if (!holders.empty()) break;
    if (absl::Now() >= find_deadline) {
      result.still_held = absl::StrCat(
          path, " is locked, so a ckptfs-storage still runs on ", data_dir, ", but for ",
          absl::FormatDuration(kSettle), " no process this user may see held it; stop it by ",
          "hand (`lslocks` lists it with that path; `fuser` would also list clients that only ",
          "keep LOCK open)");
      return result;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  const std::vector<StopOutcome> outcomes = StopProcesses(holders, grace);
  for (size_t i = 0; i < holders.size(); ++i) {
    if (outcomes[i] == StopOutcome::kTerminated || outcomes[i] == StopOutcome::kKilled) {
      result.stopped.push_back(holders[i].pid);
    }
  }
  // The kernel drops the locks as the holders' last threads exit.
  const absl::Time deadline = absl::Now() + kSettle;
  while (true) {
    absl::StatusOr<bool> locked = DataDirLocked(data_dir);
    if (!locked.ok()) return locked.status();
    if (!*locked) {
      result.released = true;
      return result;
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::vector<std::string> what;
  for (size_t i = 0; i < holders.size(); ++i) {
    what.push_back(absl::StrCat("pid ", holders[i].pid, ": ", StopOutcomeName(outcomes[i])));
  }
  const std::vector<ProcessRecord> now = HolderRecords(path);
  result.still_held =
      absl::StrCat(path, " is still locked, so a ckptfs-storage still runs on ", data_dir, " (",
                   absl::StrJoin(what, "; "),
                   now.empty() ? "" : absl::StrCat("; held now by pid ", Pids(now)), ")");
  return result;
}

}  // namespace ckptfs::tools
