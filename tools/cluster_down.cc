// `ckptfs down`: stops the local cluster recorded in a state directory:
// unmounts (retrying while busy, naming the processes that hold it, then
// detaching lazily), stops the FUSE daemon, the storage servers, the
// metadata service (and its standby) and then the etcd members, if any, one
// at a time (SIGTERM, SIGKILL after a grace period), but only processes that
// are still the ones `up` started. A storage server counts as stopped only once its
// data directory's LOCK is free (tools/data_dir_lock_probe.h): one that
// still holds it is stopped by that, whatever its record says; one that
// cannot be stopped fails `down`, and so does a LOCK it cannot probe (it
// cannot tell then). Success means nothing `up` started still runs. Data
// directories stay. Idempotent. Runs on main's thread only.
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tools/commands.h"
#include "tools/data_dir_lock_probe.h"
#include "tools/interruptible_wait.h"
#include "tools/mounts.h"
#include "tools/process.h"
#include "tools/state_dir.h"
#include "tools/table.h"

namespace ckptfs::tools {
namespace {

// Stop order: whoever uses a daemon goes before it (the metadata servers,
// standby included, before the etcd members they keep their state in; the
// repairer, `ckptfs repair --watch`, with the storage servers, before them).
int StopRank(const DaemonRecord& d) {
  if (d.role == "fuse") return 0;
  if (d.role == "repair" || absl::StartsWith(d.role, "storage")) return 1;
  if (absl::StartsWith(d.role, "etcd")) return 3;
  return 2;
}

bool Stopped(StopOutcome outcome) {
  return outcome == StopOutcome::kNotRunning || outcome == StopOutcome::kTerminated ||
         outcome == StopOutcome::kKilled;
}

// What `down` reports for a pid that still has its recorded start time but
// runs another executable than recorded.
std::string NotVerified(const ProcessRecord& recorded) {
  absl::StatusOr<ProcessRecord> now = CurrentProcessRecord(recorded.pid);
  return absl::StrCat("NOT STOPPED: pid ", recorded.pid, ", started when recorded, runs ",
                      now.ok() && !now->exe.empty() ? now->exe : "(unknown)", ", not the recorded ",
                      recorded.exe.empty() ? "(none)" : recorded.exe,
                      "; check it and stop it by hand");
}

// One daemon's row in `down`'s table: whether it is gone, and what to say.
struct DaemonResult {
  bool gone = false;
  std::string text;
};

// For a storage server whose record StopProcesses handled (`recorded`: what
// that came to): makes sure no process holds its data directory's LOCK any
// more, and returns the daemon's result after that.
DaemonResult ConfirmStorageStopped(const DaemonRecord& d, absl::Duration grace,
                                   DaemonResult recorded) {
  absl::StatusOr<DataDirRelease> release = EnsureDataDirReleased(d.data_dir, grace);
  if (!release.ok()) {  // LOCK unreadable: neither stopped nor running, as far as we know
    return {false, absl::StrCat("CANNOT TELL whether it stopped: ", release.status().message())};
  }
  if (!release->released) return {false, absl::StrCat("STILL RUNNING: ", release->still_held)};
  if (release->stopped.empty()) return recorded;
  const std::vector<pid_t>& stopped = release->stopped;
  const bool recorded_pid =
      std::find(stopped.begin(), stopped.end(), d.process.pid) != stopped.end();
  DaemonResult result;
  result.text = absl::StrCat(
      "stopped: found holding ", d.data_dir, "/LOCK as pid ", absl::StrJoin(stopped, ", "),
      recorded_pid ? " (its record did not match that process)"
                   : absl::StrCat(" (not the recorded pid ", d.process.pid, ")"));
  // The recorded pid itself is settled too unless it still runs unverified.
  const RecordMatch now = MatchRecord(d.process);
  result.gone = now == RecordMatch::kGone || now == RecordMatch::kOtherProcess;
  return result;
}

}  // namespace

CommandSpec DownSpec() {
  return CommandSpec{
      "down",
      "Unmount and stop the local cluster that `ckptfs up` started in --state-dir.",
      "Data stays in --state-dir; `ckptfs up` with the same --state-dir starts it again.\n"
      "Nothing running is not an error.",
      {
          {"state-dir", "DIR", "the directory given to `ckptfs up`", "", true},
          {"grace-s", "SECONDS", "how long to wait after SIGTERM before SIGKILL", "10"},
      }};
}

int RunDown(const ParsedFlags& flags) {
  static const CommandSpec spec = DownSpec();
  absl::StatusOr<int64_t> grace = flags.GetInt("grace-s", 0, 3600);
  if (!grace.ok()) return UsageError(spec, std::string(grace.status().message()));
  const std::string path = AbsolutePath(flags.Get("state-dir"));
  if (::access(path.c_str(), F_OK) != 0) {
    std::cout << "no cluster in " << path << " (no such directory); nothing to stop" << std::endl;
    return 0;
  }
  absl::StatusOr<StateDir> dir = StateDir::Open(path, /*create=*/false);
  if (!dir.ok()) return Failure(spec, std::string(dir.status().message()));
  if (absl::Status s = dir->Lock(); !s.ok()) return Failure(spec, std::string(s.message()));
  absl::StatusOr<std::optional<ClusterState>> loaded = dir->Load();
  if (!loaded.ok()) return Failure(spec, std::string(loaded.status().message()));
  if (!loaded->has_value()) {
    std::cout << "no cluster is running from " << dir->path() << "; nothing to stop" << std::endl;
    return 0;
  }
  ClusterState state = std::move(**loaded);
  bool failed = false;
  // Taken before unmounting: the FUSE daemon exits by itself once unmounted.
  std::vector<bool> was_running;
  for (const DaemonRecord& d : state.daemons) was_running.push_back(IsRunning(d.process));

  if (!state.mountpoint.empty()) {
    std::optional<MountEntry> mount = FindMount(state.mountpoint);
    if (mount.has_value() && mount->is_fuse()) {
      absl::StatusOr<UnmountResult> result =
          UnmountWithRetries(state.mountpoint, /*attempts=*/5, /*lazy=*/true,
                             [](const std::string& line) { std::cout << line << std::endl; });
      if (!result.ok()) {
        std::cerr << "ckptfs down: " << result.status().message() << std::endl;
        failed = true;
      } else if (*result == UnmountResult::kDetachedLazily) {
        std::cout << "detached " << state.mountpoint << " (lazily)" << std::endl;
      } else {
        std::cout << "unmounted " << state.mountpoint << std::endl;
      }
    }
  }

  std::vector<std::vector<std::string>> rows = {{"ROLE", "ADDRESS", "PID", "RESULT"}};
  std::vector<DaemonRecord> remaining;
  for (int rank = 0; rank <= 3; ++rank) {
    std::vector<const DaemonRecord*> group;
    std::vector<ProcessRecord> records;
    std::vector<bool> group_was_running;
    for (size_t i = 0; i < state.daemons.size(); ++i) {
      if (StopRank(state.daemons[i]) != rank) continue;
      group.push_back(&state.daemons[i]);
      records.push_back(state.daemons[i].process);
      group_was_running.push_back(was_running[i]);
    }
    if (group.empty()) continue;
    if (rank == 0) {  // the FUSE daemon: give it a moment to exit by itself
      (void)WaitFor("ckptfs-fuse to exit", absl::Seconds(3), [&]() -> absl::StatusOr<bool> {
        for (const ProcessRecord& r : records) {
          if (IsRunning(r)) return false;
        }
        return true;
      });
    }
    std::vector<StopOutcome> outcomes;
    if (rank == 3) {
      // The etcd members one at a time: a member that stops while it leads
      // first hands the leadership to a peer, and waits out etcd's request
      // timeout (about 7 s) when every peer is stopping too.
      for (const ProcessRecord& r : records) {
        outcomes.push_back(StopProcesses({r}, absl::Seconds(*grace)).front());
      }
    } else {
      outcomes = StopProcesses(records, absl::Seconds(*grace));
    }
    for (size_t i = 0; i < group.size(); ++i) {
      DaemonResult result{Stopped(outcomes[i]), StopOutcomeName(outcomes[i])};
      if (outcomes[i] == StopOutcome::kNotRunning && group_was_running[i]) {
        result.text = rank == 0 ? "stopped (exited after unmount)" : "exited by itself";
      }
      if (outcomes[i] == StopOutcome::kNotVerified) result.text = NotVerified(group[i]->process);
      // Whatever its record said: gone only once its data directory is free.
      if (absl::StartsWith(group[i]->role, "storage") && !group[i]->data_dir.empty()) {
        result = ConfirmStorageStopped(*group[i], absl::Seconds(*grace), std::move(result));
      }
      rows.push_back(
          {group[i]->role, group[i]->address, absl::StrCat(group[i]->process.pid), result.text});
      if (!result.gone) {
        failed = true;
        remaining.push_back(*group[i]);
      }
    }
  }
  std::cout << FormatTable(rows);
  if (!remaining.empty()) {
    state.daemons = remaining;
    (void)dir->Save(state);
    std::cerr << "ckptfs down: some processes could not be stopped; cluster.state keeps "
                 "them, run `ckptfs down` again"
              << std::endl;
    return 1;
  }
  if (absl::Status s = dir->Remove(); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  std::cout << "cluster of " << dir->path() << " is down; its data stays there (start it "
            << "again with: ckptfs up --state-dir " << dir->path()
            << (state.mountpoint.empty() ? "" : " --mountpoint " + state.mountpoint)
            << (std::any_of(state.daemons.begin(), state.daemons.end(),
                            [](const DaemonRecord& d) { return absl::StartsWith(d.role, "etcd"); })
                    ? " --meta-backend etcd"
                    : "")
            << ")" << std::endl;
  return failed ? 1 : 0;
}

}  // namespace ckptfs::tools
