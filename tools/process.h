// Starting, watching and stopping the daemons of a local cluster.
//
// `ckptfs up` starts each daemon detached (its own session, stdin from
// /dev/null, stdout and stderr appended to a log file) and records a
// ProcessRecord for it. `ckptfs down`, usually a later invocation, stops
// only processes whose record still matches: same pid, same start time (so a
// recycled pid is never signalled) and same executable (MatchRecord). A
// process counts as exited once it is a zombie with no live thread left (a
// zombie main thread whose other threads still run is still running). A pid
// that still has the recorded start time but runs another executable is
// neither signalled nor reported gone: `down` says so and fails. Signals go
// through a pidfd opened before the record is checked, so a pid recycled
// between the check and the signal is never hit. Thread-compatible:
// functions touch only the processes named; SpawnDetached forks, so call it
// from a thread that holds no locks the child could need (it execs right
// away and calls only async-signal-safe functions in between).
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
// exec failure comes back as an error naming argv[0]; the rest as
// AwaitSpawnedExec says. The process is a child of the caller until the
// caller exits.
absl::StatusOr<ProcessRecord> SpawnDetached(const std::vector<std::string>& argv,
                                            const std::string& log_path);

// Waits up to `limit` until the exec of `pid` has completed, then returns its
// record (its start time and the new image's executable). A child that died
// after its exec and is not reaped yet still gets a record (exe "", if it is
// gone); ReapIfExited then tells how it ended. Unavailable ("exited during
// start-up") when the child is gone without a trace: reaped elsewhere (say,
// SIGCHLD ignored), so its pid may already name another process and is
// never signalled. DeadlineExceeded when the exec did not complete within
// `limit`: the child is SIGKILLed and reaped, but only while it provably is
// still the caller's unreaped child. `name` is for messages.
// REQUIRES: `pid` was started by the caller (posix_spawn or fork) and the
// caller has not reaped it.
absl::StatusOr<ProcessRecord> AwaitSpawnedExec(pid_t pid, const std::string& name,
                                               absl::Duration limit);

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
// Compares `record` with the live process that has its pid now, from /proc.
// A record naming the caller's own executable (the ckptfs CLI) while the
// live process with its pid and start time runs another one is kSame: that
// is the record an older `ckptfs up` wrote when it read /proc/<pid>/exe
// before the child's exec had completed (the image was still ckptfs's), and
// a pid with the recorded start time is the recorded process. Any other
// executable mismatch stays kOtherExecutable, except for a process that
// shows no executable (exiting, its memory already gone, or its main
// thread exited while others still run): the start time decides. Cannot
// tell a record apart
// from a process that started in the same clock tick with a recycled pid.
// REQUIRES: nothing; a record with pid <= 0 is kGone.
RecordMatch MatchRecord(const ProcessRecord& record);

// True while `record` names a live process that is the one recorded: same
// start time and same executable ("(deleted)" suffix, left by a rebuilt
// binary, ignored). MatchRecord(record) == kSame.
bool IsRunning(const ProcessRecord& record);

// The record of the live process that has `pid` now (its start time and
// executable); NotFound when there is none.
absl::StatusOr<ProcessRecord> CurrentProcessRecord(pid_t pid);

// What StopProcess did.
enum class StopOutcome {
  kNotRunning,    // already gone (or the pid now belongs to another process)
  kTerminated,    // exited after SIGTERM
  kKilled,        // needed SIGKILL
  kStuck,         // still there after SIGKILL
  kNotPermitted,  // running, but we may not signal it (another user's)
  kNotVerified,   // MatchRecord says kOtherExecutable: not signalled, maybe running
};
const char* StopOutcomeName(StopOutcome outcome);

// Sends SIGTERM to every record that IsRunning, waits up to `grace` for all
// of them, SIGKILLs the stragglers and waits a little more. Each process is
// pinned with a pidfd before its record is checked and signalled through it,
// so a pid recycled after the check is never signalled. Reaps those that
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
