// Starting, watching and stopping the daemons of a local cluster.
//
// `ckptfs up` starts each daemon detached (its own session, stdin from
// /dev/null, stdout and stderr appended to a log file) and records a
// ProcessRecord for it. `ckptfs down`, usually a later invocation, stops
// only processes whose record still matches: same pid, same start time (so a
// recycled pid is never signalled) and same executable. Zombies count as
// exited. A pid that still has the recorded start time but runs another
// executable is neither signalled nor reported gone: `down` says so and
// fails. Thread-compatible: functions touch only the processes named;
// SpawnDetached forks, so call it from a thread that holds no locks the
// child could need (it execs right away and calls only async-signal-safe
// functions in between).
#ifndef CKPTFS_TOOLS_PROCESS_H_
#define CKPTFS_TOOLS_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ckptfs::tools {

// Identifies one process across invocations of the tool.
struct ProcessRecord {
  pid_t pid = 0;
  uint64_t start_time = 0;  // field 22 of /proc/<pid>/stat (clock ticks)
  std::string exe;          // /proc/<pid>/exe once the exec has completed
};

// Starts argv[0] (an absolute path) with `argv` in a new session; its stdout
// and stderr are appended to `log_path` (created if missing). Returns once the
// exec has completed, with the new image's executable recorded (not the
// caller's, which /proc shows for a moment after posix_spawn returns); an
// exec failure comes back as an error naming argv[0], an exec not complete
// after 10 s as DeadlineExceeded (the child SIGKILLed). The process is a
// child of the caller until the caller exits.
absl::StatusOr<ProcessRecord> SpawnDetached(const std::vector<std::string>& argv,
                                            const std::string& log_path);

// If `pid`, a child of the caller, has exited, reaps it and describes how
// ("exited with status 2", "killed by signal 9"); nullopt while it runs.
std::optional<std::string> ReapIfExited(pid_t pid);

// How the live process that now has a record's pid compares with the record.
enum class RecordMatch {
  kGone,          // no live (non-zombie) process has the pid
  kSame,          // same start time and same executable: the recorded one
  kOtherProcess,  // another start time: the pid was recycled
  // Same start time, other executable: almost surely the recorded process
  // (a pid is reused only after its process is gone), but not provably, so
  // it is neither signalled nor taken for gone.
  kOtherExecutable,
};
RecordMatch MatchRecord(const ProcessRecord& record);

// True while `record` names a live (non-zombie) process that is the one
// recorded: same start time and same executable ("(deleted)" suffix, left by
// a rebuilt binary, ignored). MatchRecord(record) == kSame.
bool IsRunning(const ProcessRecord& record);

// The record of the live process that has `pid` now (its start time and
// executable); NotFound when there is none.
absl::StatusOr<ProcessRecord> CurrentProcessRecord(pid_t pid);

// What StopProcess did.
enum class StopOutcome {
  kNotRunning,  // already gone (or the pid now belongs to another process)
  kTerminated,  // exited after SIGTERM
  kKilled,      // needed SIGKILL
  kStuck,       // still there after SIGKILL
  kNotPermitted,  // running, but we may not signal it (another user's)
  kNotVerified,   // MatchRecord says kOtherExecutable: not signalled, maybe running
};
const char* StopOutcomeName(StopOutcome outcome);

// Sends SIGTERM to every record that IsRunning, waits up to `grace` for all
// of them, SIGKILLs the stragglers and waits a little more. Reaps those that
// are children of the caller. Returns one outcome per record, in order; only
// kNotRunning, kTerminated and kKilled mean the process is no longer running.
std::vector<StopOutcome> StopProcesses(const std::vector<ProcessRecord>& records,
                                       absl::Duration grace);

// The start time of `pid` (field 22 of /proc/<pid>/stat), or NotFound.
absl::StatusOr<uint64_t> ProcessStartTime(pid_t pid);

// Runs argv to completion (no shell) and returns its exit status (or 128 +
// signal) with stdout and stderr combined in `output`.
struct CommandResult {
  int exit_status = 0;
  std::string output;
};
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv);

// The last `max_lines` lines of a text file ("" if unreadable).
std::string TailFile(const std::string& path, int max_lines);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_PROCESS_H_
