// See process.h.
#include "tools/process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/unique_fd.h"

extern char** environ;

namespace ckptfs::tools {
namespace {

// argv as the char* array exec wants; points into `args`.
std::vector<char*> CArgv(const std::vector<std::string>& args) {
  std::vector<char*> out;
  out.reserve(args.size() + 1);
  for (const std::string& arg : args) out.push_back(const_cast<char*>(arg.c_str()));
  out.push_back(nullptr);
  return out;
}

// RAII for posix_spawn's attribute and file-action objects.
class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions_);
    posix_spawnattr_init(&attr_);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  posix_spawn_file_actions_t* actions() { return &actions_; }
  posix_spawnattr_t* attr() { return &attr_; }

  // Children start with no blocked signals and default dispositions for the
  // signals a tool might catch or ignore.
  void ResetSignals() {
    sigset_t empty;
    sigemptyset(&empty);
    posix_spawnattr_setsigmask(&attr_, &empty);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) {
      sigaddset(&defaults, sig);
    }
    posix_spawnattr_setsigdefault(&attr_, &defaults);
  }

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

std::string ReadLinkOrEmpty(const std::string& path) {
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string target(buf, static_cast<size_t>(n));
  // A binary replaced by a rebuild reads as "/path/bin (deleted)".
  constexpr absl::string_view kDeleted = " (deleted)";
  if (absl::EndsWith(target, kDeleted)) target.resize(target.size() - kDeleted.size());
  return target;
}

// The caller's own executable: the ckptfs CLI (or a test binary).
const std::string& OwnExecutable() {
  static const std::string* const exe = new std::string(ReadLinkOrEmpty("/proc/self/exe"));
  return *exe;
}

// The state letter, kernel flags, thread count and start time from
// /proc/<pid>/stat.
struct ProcStat {
  char state = '?';
  uint64_t flags = 0;       // PF_* (field 9)
  int64_t num_threads = 0;  // field 20; a zombie main thread still counts
  uint64_t start_time = 0;
};

// PF_FORKNOEXEC (include/linux/sched.h): set by fork/clone, cleared by exec
// once the new image's mm is in place, i.e. after /proc/<pid>/exe shows it.
constexpr uint64_t kForkedNoExec = 0x00000040;

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  // "pid (comm) S ppid ...": comm may hold spaces and ')', so split after
  // the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(line).substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state); field 9 (flags) is fields[6], field 20
  // (num_threads) fields[17] and field 22 (starttime) fields[19].
  if (fields.size() < 20 || fields[0].empty()) return std::nullopt;
  ProcStat stat;
  stat.state = fields[0][0];
  if (!absl::SimpleAtoi(fields[6], &stat.flags) ||
      !absl::SimpleAtoi(fields[17], &stat.num_threads) ||
      !absl::SimpleAtoi(fields[19], &stat.start_time)) {
    return std::nullopt;
  }
  return stat;
}

// Gone, or a zombie with no live thread left. A main thread that exited
// (pthread_exit, or first to die of a SIGKILL) is a zombie while the other
// threads still run and hold the process's files, locks and ports.
bool Exited(const std::optional<ProcStat>& stat) {
  return !stat || stat->state == 'X' || (stat->state == 'Z' && stat->num_threads <= 1);
}

// Whether `pid` is a child of the caller that nobody has reaped (running or
// a zombie): until it is reaped its pid cannot name another process.
bool UnreapedChild(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

// Names one process for good (a pidfd), so that a signal sent through it
// never reaches a process that took over the pid later. Opened before the
// process is checked: if the check passes, the handle names the checked
// process. Without pidfds (kernels before 5.3) it falls back to the pid.
class ProcessHandle {
 public:
  explicit ProcessHandle(pid_t pid)
      : pid_(pid), fd_(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))) {
    if (!fd_.valid()) gone_ = errno == ESRCH;
  }

  // Sends `sig`; returns 0 or the errno (ESRCH: the process is gone).
  int Signal(int sig) const {
    if (gone_) return ESRCH;
    const long r = fd_.valid() ? ::syscall(SYS_pidfd_send_signal, fd_.get(), sig, nullptr, 0)
                               : ::kill(pid_, sig);
    return r == 0 ? 0 : errno;
  }

 private:
  pid_t pid_;
  UniqueFd fd_;
  bool gone_ = false;  // no process had the pid when the handle was opened
};

// Waits until the exec of `pid`, a child that posix_spawn has just started,
// has completed, so that /proc/<pid>/exe names the new image. glibc's
// posix_spawn returns when the kernel releases the vfork parent, which exec
// does (exec_mmap -> mm_release) *before* it installs the new mm: until then
// /proc/<pid>/exe still names the caller's executable (ckptfs). Recording
// that made `ckptfs down` take a running daemon for "not running" and leave
// it behind.
struct ExecProgress {
  enum Outcome {
    kDone,      // the exec completed, or the child died and is a zombie: `stat`
    kVanished,  // no /proc/<pid>/stat: reaped (elsewhere), or /proc unreadable
    kTimedOut,  // still the caller's image after the limit
  };
  Outcome outcome = kTimedOut;
  ProcStat stat;
};
ExecProgress AwaitExec(pid_t pid, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  for (int round = 0;; ++round) {
    std::optional<ProcStat> stat = ReadProcStat(pid);
    if (!stat) return {ExecProgress::kVanished, {}};
    if (Exited(stat) || (stat->flags & kForkedNoExec) == 0) return {ExecProgress::kDone, *stat};
    if (absl::Now() >= deadline) return {ExecProgress::kTimedOut, *stat};
    // Microseconds as a rule: the child only has to take a lock or two.
    if (round < 100) {
      ::sched_yield();
    } else {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                        ")");
  }
  return "stopped";
}

void ReapQuietly(pid_t pid) {
  int status = 0;
  (void)::waitpid(pid, &status, WNOHANG);
}

}  // namespace

absl::StatusOr<uint64_t> ProcessStartTime(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return ErrnoStatus(ESRCH, absl::StrCat("no process ", pid));
  return stat->start_time;
}

absl::StatusOr<ProcessRecord> SpawnDetached(const std::vector<std::string>& argv,
                                            const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log.valid()) return SyscallError(errno, absl::StrCat("open log ", log_path));
  const std::string banner =
      absl::StrCat("==== ckptfs: starting ", absl::StrJoin(argv, " "), " at ",
                   absl::FormatTime(absl::Now(), absl::UTCTimeZone()), " ====\n");
  (void)::write(log.get(), banner.data(), banner.size());

  SpawnSetup setup;
  setup.ResetSignals();
  posix_spawnattr_setflags(setup.attr(),
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawn_file_actions_addopen(setup.actions(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(setup.actions(), log.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(setup.actions(), log.get(), STDERR_FILENO);
  // Nothing of ours (sockets, the state-dir lock) leaks into a daemon.
  posix_spawn_file_actions_addclosefrom_np(setup.actions(), 3);

  std::vector<char*> cargv = CArgv(argv);
  pid_t pid = 0;
  const int err =
      ::posix_spawn(&pid, argv[0].c_str(), setup.actions(), setup.attr(), cargv.data(), environ);
  if (err != 0) return SyscallError(err, absl::StrCat("start ", argv[0]));
  absl::StatusOr<ProcessRecord> record = AwaitSpawnedExec(pid, argv[0], absl::Seconds(10));
  if (absl::IsUnavailable(record.status())) {
    return absl::UnavailableError(absl::StrCat(record.status().message(), "; see ", log_path));
  }
  return record;
}

absl::StatusOr<ProcessRecord> AwaitSpawnedExec(pid_t pid, const std::string& name,
                                               absl::Duration limit) {
  const ProcessHandle handle(pid);
  const ExecProgress progress = AwaitExec(pid, limit);
  if (progress.outcome != ExecProgress::kDone) {
    // Never an untracked daemon: stop the one we cannot record (not waiting
    // for it: an exec stuck this long may be stuck in the kernel). But only
    // while it is provably still our unreaped child: a child reaped
    // elsewhere may have handed its pid on.
    const bool ours = UnreapedChild(pid);
    if (ours) {
      (void)handle.Signal(SIGKILL);
      ReapQuietly(pid);
    }
    if (progress.outcome == ExecProgress::kTimedOut) {
      return absl::DeadlineExceededError(
          absl::StrCat("start ", name, ": its exec did not complete within ",
                       absl::FormatDuration(limit), ours ? " (killed it)" : ""));
    }
    if (ours) {  // alive, but /proc would not show it
      return absl::UnavailableError(absl::StrCat("start ", name, ": cannot read /proc/", pid,
                                                 "/stat of the started process (killed it)"));
    }
    return absl::UnavailableError(absl::StrCat("start ", name, ": it exited during start-up (pid ",
                                               pid,
                                               ", reaped elsewhere, so how it ended is unknown)"));
  }
  ProcessRecord record;
  record.pid = pid;
  // Read after the exec: the record must name the daemon's image. A child
  // that died already reads as "" and is reported by ReapIfExited.
  record.exe = ReadLinkOrEmpty(absl::StrCat("/proc/", pid, "/exe"));
  record.start_time = progress.stat.start_time;
  return record;
}

std::optional<std::string> ReapIfExited(pid_t pid) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) return DescribeWaitStatus(status);
  if (r == 0) return std::nullopt;
  // Not our child: judge from /proc.
  if (Exited(ReadProcStat(pid))) return std::string("exited");
  return std::nullopt;
}

RecordMatch MatchRecord(const ProcessRecord& record) {
  if (record.pid <= 0) return RecordMatch::kGone;
  std::optional<ProcStat> stat = ReadProcStat(record.pid);
  if (Exited(stat)) return RecordMatch::kGone;
  if (stat->start_time != record.start_time) return RecordMatch::kOtherProcess;
  const std::string exe = ReadLinkOrEmpty(absl::StrCat("/proc/", record.pid, "/exe"));
  if (exe == record.exe) return RecordMatch::kSame;
  // It may have died (or even been replaced) between the reads.
  stat = ReadProcStat(record.pid);
  if (Exited(stat)) return RecordMatch::kGone;
  if (stat->start_time != record.start_time) return RecordMatch::kOtherProcess;
  // No executable to read: the process is exiting (its memory goes before
  // it becomes a zombie: a daemon that `down` just unmounted), or its main
  // thread has exited while other threads run. The start time has to do.
  if (exe.empty()) return RecordMatch::kSame;
  // The record of the old `up` race (see process.h): the caller's image.
  if (!record.exe.empty() && record.exe == OwnExecutable()) return RecordMatch::kSame;
  return RecordMatch::kOtherExecutable;
}

bool IsRunning(const ProcessRecord& record) { return MatchRecord(record) == RecordMatch::kSame; }

absl::StatusOr<ProcessRecord> CurrentProcessRecord(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (Exited(stat)) return absl::NotFoundError(absl::StrCat("no live process ", pid));
  ProcessRecord record;
  record.pid = pid;
  record.start_time = stat->start_time;
  record.exe = ReadLinkOrEmpty(absl::StrCat("/proc/", pid, "/exe"));
  return record;
}

const char* StopOutcomeName(StopOutcome outcome) {
  switch (outcome) {
    case StopOutcome::kNotRunning:
      return "was not running";
    case StopOutcome::kTerminated:
      return "stopped";
    case StopOutcome::kKilled:
      return "killed (did not stop on SIGTERM)";
    case StopOutcome::kStuck:
      return "STILL RUNNING after SIGKILL";
    case StopOutcome::kNotPermitted:
      return "NOT STOPPED: not permitted to signal it";
    case StopOutcome::kNotVerified:
      return "NOT STOPPED: its pid, started when recorded, runs another executable";
  }
  return "?";
}

std::vector<StopOutcome> StopProcesses(const std::vector<ProcessRecord>& records,
                                       absl::Duration grace) {
  std::vector<StopOutcome> outcomes(records.size(), StopOutcome::kNotRunning);
  std::vector<ProcessHandle> handles;
  handles.reserve(records.size());
  std::vector<size_t> pending;
  for (size_t i = 0; i < records.size(); ++i) {
    ReapQuietly(records[i].pid);
    // Opened before the check: a pid recycled after it is not the handle's.
    handles.emplace_back(records[i].pid);
    const RecordMatch match = MatchRecord(records[i]);
    if (match == RecordMatch::kOtherExecutable) outcomes[i] = StopOutcome::kNotVerified;
    if (match != RecordMatch::kSame) continue;
    const int err = handles[i].Signal(SIGTERM);
    if (err == 0) {
      outcomes[i] = StopOutcome::kTerminated;
      pending.push_back(i);
    } else if (err == EPERM) {
      outcomes[i] = StopOutcome::kNotPermitted;
    }
  }
  auto wait_for = [&](absl::Duration limit) {
    const absl::Time deadline = absl::Now() + limit;
    while (!pending.empty()) {
      std::vector<size_t> still;
      for (size_t i : pending) {
        ReapQuietly(records[i].pid);
        if (IsRunning(records[i])) still.push_back(i);
      }
      pending.swap(still);
      if (pending.empty() || absl::Now() >= deadline) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
  };
  wait_for(grace);
  for (size_t i : pending) {
    (void)handles[i].Signal(SIGKILL);
    outcomes[i] = StopOutcome::kKilled;
  }
  wait_for(absl::Seconds(5));
  for (size_t i : pending) outcomes[i] = StopOutcome::kStuck;
  return outcomes;
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return SyscallError(errno, "pipe2");
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  SpawnSetup setup;
  setup.ResetSignals();
  posix_spawnattr_setflags(setup.attr(), POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawn_file_actions_addopen(setup.actions(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(setup.actions(), write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(setup.actions(), write_end.get(), STDERR_FILENO);
  std::vector<char*> cargv = CArgv(argv);
  pid_t pid = 0;
  const int err =
      ::posix_spawnp(&pid, argv[0].c_str(), setup.actions(), setup.attr(), cargv.data(), environ);
  if (err != 0) return SyscallError(err, absl::StrCat("run ", argv[0]));
  write_end.Reset();
  CommandResult result;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(read_end.get(), buf, sizeof(buf));
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return SyscallError(errno, absl::StrCat("wait for ", argv[0]));
  }
  result.exit_status = WIFEXITED(status)     ? WEXITSTATUS(status)
                       : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                             : 255;
  return result;
}

std::string TailFile(const std::string& path, int max_lines) {
  std::ifstream in(path);
  if (!in) return "";
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(std::move(line));
    if (lines.size() > static_cast<size_t>(max_lines)) lines.pop_front();
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace ckptfs::tools
