// See runner.h.
#include "bench/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/cpu.h"
#include "bench/disk.h"
#include "bench/target.h"
#include "bench/workload.h"
#include "common/errno_status.h"
#include "common/reserved_xattrs.h"

namespace ckptfs::bench {
namespace {

// CKPTFS_BENCH_TEST_DIE_RANK: which rank dies in its save, and how.
struct DieHook {
  enum How { kExit, kSignal, kHang };
  int rank = -1;
  How how = kExit;
};

DieHook ReadDieHook() {
  DieHook hook;
  const char* env = std::getenv("CKPTFS_BENCH_TEST_DIE_RANK");
  if (env == nullptr) return hook;
  std::vector<std::string> parts = absl::StrSplit(env, ':');
  if (!parts.empty() && absl::SimpleAtoi(parts[0], &hook.rank)) {
    if (parts.size() > 1 && parts[1] == "signal") hook.how = DieHook::kSignal;
    if (parts.size() > 1 && parts[1] == "hang") hook.how = DieHook::kHang;
  } else {
    hook.rank = -1;
  }
  return hook;
}

// Passes bytes on, then ends (or stops) the process after the first ones
// (test hook).
class DyingSink : public ProgressSink {
 public:
  DyingSink(ProgressSink& inner, DieHook::How how) : inner_(inner), how_(how) {}
  void OnBytes(uint64_t bytes) override {
    inner_.OnBytes(bytes);
    if (how_ == DieHook::kSignal) ::kill(::getpid(), SIGKILL);
    while (how_ == DieHook::kHang) ::pause();
    ::_exit(41);
  }

 private:
  ProgressSink& inner_;
  DieHook::How how_;
};

std::vector<int> AllRanks(int n) {
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  return ranks;
}

bool IsBarrierMissing(int err) { return err == ENOTSUP || err == EOPNOTSUPP || err == ENODATA; }

class Runner {
 public:
  Runner(const BenchOptions& options, ProgressMeter& progress)
      : options_(options), progress_(progress), die_(ReadDieHook()) {}

  absl::StatusOr<BenchResult> Run() {
    result_.start_ns = MonotonicNowNs();
    absl::Status status = OpenTargets();
    if (status.ok()) status = RunAll();
    for (auto& target : targets_) {
      absl::Status removed = target->executor->ControlIo().RemoveTree(work_);
      if (!removed.ok()) {
        Note(absl::StrCat("target ", target->label, ": could not remove ", target->root, "/", work_,
                          ": ", removed.message()));
      }
    }
    result_.end_ns = MonotonicNowNs();
    for (auto& target : targets_) {
      TargetDescription d;
      d.label = target->label;
      d.path = target->path;
      d.root = target->root;
      d.native = target->native;
      d.fs_type = target->fs_type;
      d.is_ckptfs = target->is_ckptfs;
      d.commit = target->commit;
      d.commit_note = target->commit_note;
      d.target_procs = target->target_procs;
      d.target_procs_label = target->target_procs_label;
      result_.targets.push_back(std::move(d));
    }
    result_.segments = progress_.segments();
    result_.points = progress_.points();
    if (!status.ok()) return status;
    return std::move(result_);
  }

 private:
  void Note(const std::string& line) {
    result_.notes.push_back(line);
    progress_.Note(absl::StrCat("ckptfs-bench: ", line));
  }

  // The device the phases' disk figures describe (bench/disk.h).
  // InvalidArgument when --disk names one /proc/diskstats does not list.
  absl::Status ChooseDisk() {
    if (options_.disk == "none") return absl::OkStatus();
    if (!options_.disk.empty()) {
      result_.disk = options_.disk;
      result_.disk_reason = "--disk";
    } else {
      for (auto it = targets_.rbegin(); it != targets_.rend(); ++it) {  // B first
        if ((*it)->native) continue;
        if (std::optional<std::string> disk = DiskHolding((*it)->root); disk.has_value()) {
          result_.disk = *disk;
          result_.disk_reason = absl::StrCat("holds ", (*it)->label, "'s directory");
          break;
        }
      }
      if (result_.disk.empty()) return absl::OkStatus();
    }
    // A device found by its directory that /proc/diskstats does not list
    // (a container's virtualized view) gets no figures, once said.
    DiskMeter probe(result_.disk);
    probe.Start();
    if (!probe.Stop().has_value()) {
      if (!options_.disk.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--disk ", options_.disk,
                         ": /proc/diskstats lists no such device (names as in "
                         "/sys/block: vda, nvme0n1, md0; or none)"));
      }
      Note(absl::StrCat("disk ", result_.disk, " (", result_.disk_reason,
                        ") is not in /proc/diskstats: no disk figures"));
      result_.disk.clear();
      result_.disk_reason.clear();
    }
    return absl::OkStatus();
  }

  absl::Status OpenTargets() {
    work_ = absl::StrCat("ckptfs-bench.", ::getpid());
    absl::StatusOr<std::unique_ptr<Target>> a =
        options_.native
            ? OpenNativeTarget("A", options_.meta_address, options_.dir, options_.threads)
            : OpenDirTarget("A", options_.dir);
    if (!a.ok())
      return absl::Status(a.status().code(), absl::StrCat("target A: ", a.status().message()));
    targets_.push_back(std::move(*a));
    if (!options_.baseline_dir.empty()) {
      absl::StatusOr<std::unique_ptr<Target>> b = OpenDirTarget("B", options_.baseline_dir);
      if (!b.ok()) {
        return absl::Status(b.status().code(), absl::StrCat("baseline B: ", b.status().message()));
      }
      targets_.push_back(std::move(*b));
    }
    if (absl::Status chosen = ChooseDisk(); !chosen.ok()) return chosen;
    for (auto& target : targets_) {
      DecideCommit(*target);
      ChooseTargetProcesses(*target);
      target->executor->set_phase_timeout_s(options_.phase_timeout_s);
      absl::Status made = target->executor->ControlIo().MakeDirs(work_);
      if (!made.ok()) return TargetError(*target, "creating the work directory", made);
      if (target->commit && options_.commit_timeout_s > 0) {
        // Checkpoints take their barrier timeout from their parent.
        absl::Status set = target->executor->ControlIo().SetXattr(
            work_, kCommitTimeoutXattr, absl::StrCat(options_.commit_timeout_s));
        if (!set.ok()) {
          Note(absl::StrCat("target ", target->label,
                            ": --commit-timeout not applied: ", set.message()));
        }
      }
    }
    return absl::OkStatus();
  }

  // --target-procs, or on ckptfs the daemons of the cluster serving the
  // target (every ckptfs daemon on this machine if they cannot be told).
  void ChooseTargetProcesses(Target& target) {
    if (options_.target_procs_given) {
      target.target_procs = options_.target_procs;
      target.target_procs_label = absl::StrJoin(options_.target_procs, ",");
      return;
    }
    if (!target.is_ckptfs) return;
    const std::vector<pid_t> pids = FindCkptfsClusterProcesses(
        target.native ? "" : target.mount_point, target.native ? target.meta_address : "");
    if (!pids.empty()) {
      for (pid_t pid : pids) target.target_procs.push_back(absl::StrCat(pid));
      target.target_procs_label = DescribeProcesses(pids);
      return;
    }
    target.target_procs = CkptfsDaemonNames();
    target.target_procs_label = absl::StrCat(absl::StrJoin(CkptfsDaemonNames(), ","),
                                             " (every such process on this machine)");
    Note(
        absl::StrCat("target ", target.label,
                     ": could not tell which ckptfs daemons serve it; counting the CPU of "
                     "every ckptfs-fuse, ckptfs-storage and ckptfs-meta (or pass --target-procs)"));
  }

  bool Selected(Phase phase) const {
    return std::find(options_.phases.begin(), options_.phases.end(), phase) !=
           options_.phases.end();
  }

  void DecideCommit(Target& target) {
    if (!Selected(Phase::kCommit)) {
      target.commit_note = "off (commit phase not selected)";
      return;
    }
    switch (options_.commit) {
      case CommitMode::kOff:
        target.commit_note = "off (--commit off)";
        return;
      case CommitMode::kOn:
        target.commit = true;
        target.commit_note = "on (--commit on)";
        return;
      case CommitMode::kAuto:
        target.commit = target.is_ckptfs;
        target.commit_note =
            target.is_ckptfs
                ? "on (target is ckptfs)"
                : absl::StrCat("off (", target.fs_type.empty() ? "unknown" : target.fs_type,
                               " is not ckptfs)");
        return;
    }
  }

  // Declares `step` a checkpoint of N ranks. The first declare on a target
  // confirms that the barrier exists, or turns --commit auto off.
  absl::Status Declare(Target& target, const std::string& step) {
    RankIo& io = target.executor->ControlIo();
    const std::string ranks = absl::StrCat(options_.spec.ranks);
    absl::Status declared = io.SetXattr(step, kRanksXattr, ranks);
    std::string missing;
    if (!declared.ok()) {
      const int err = ErrnoFromStatus(declared);
      if (!IsBarrierMissing(err) || target.commit_confirmed) {
        return TargetError(target, "declaring the checkpoint", declared);
      }
      missing = absl::StrCat("setxattr ", kRanksXattr, " failed with ", ::strerrorname_np(err),
                             " (", declared.message(), ")");
    } else {
      absl::StatusOr<std::string> state = io.GetXattr(step, kStateXattr);
      if (state.ok() && *state == "pending") {
        if (!target.commit_confirmed) {
          target.commit_note += absl::StrCat(
              ": barrier answered (user.ckptfs.state=pending); ranks commit with ",
              target.executor->ranks_are_processes() ? "getxattr user.ckptfs.commit.R"
                                                     : "setxattr user.ckptfs.commit=R");
        }
        target.commit_confirmed = true;
        return absl::OkStatus();
      }
      missing = state.ok()
                    ? absl::StrCat("after declaring, ", kStateXattr, " reads \"", *state, "\"")
                    : absl::StrCat("after declaring, getxattr ", kStateXattr, " failed with ",
                                   ::strerrorname_np(ErrnoFromStatus(state.status())));
      if (target.commit_confirmed) {
        return TargetError(target, "declaring the checkpoint", absl::InternalError(missing));
      }
    }
    if (options_.commit == CommitMode::kOn) {
      return TargetError(target, "declaring the checkpoint (--commit on)",
                         absl::UnimplementedError(absl::StrCat("no commit barrier: ", missing)));
    }
    target.commit = false;
    target.commit_note = absl::StrCat("off (barrier not available: ", missing, ")");
    Note(absl::StrCat("target ", target.label,
                      ": commit phase skipped, barrier not available: ", missing));
    return absl::OkStatus();
  }

  absl::Status TargetError(const Target& target, const std::string& what,
                           const absl::Status& status) {
    const int err = ErrnoFromStatus(status);
    std::string message = absl::StrCat("target ", target.label, " (", target.root, "): ", what,
                                       ": ", status.message());
    if (err == ENOSPC || err == EDQUOT) {
      message =
          absl::StrCat("target ", target.label, " (", target.root, ") is full (",
                       err == ENOSPC ? "ENOSPC" : "EDQUOT", "): ", what, ": ", status.message());
    }
    return absl::Status(status.code(), message);
  }

  absl::Status RunAll() {
    for (int repeat = 0; repeat < options_.repeat; ++repeat) {
      for (auto& target : targets_) {
        absl::Status status = RunRepeat(*target, repeat);
        if (!status.ok()) return status;
      }
    }
    return absl::OkStatus();
  }

  absl::Status RunRepeat(Target& target, int repeat) {
    RankIo& io = target.executor->ControlIo();
    const std::string step = absl::StrCat(work_, "/step_", repeat);
    const std::string where = absl::StrCat("repeat ", repeat + 1);
    absl::Status made = io.MakeDirs(step);
    if (!made.ok()) return TargetError(target, absl::StrCat(where, ": mkdir ", step), made);
    if (target.commit) {
      absl::Status declared = Declare(target, step);
      if (!declared.ok()) return declared;
    }
    absl::Status status = RunPhases(target, repeat, step);
    absl::Status removed = RemoveStep(target, repeat, step);
    if (!removed.ok() && status.ok()) {
      Note(absl::StrCat("target ", target.label, ": could not remove ", step, ": ",
                        removed.message()));
    }
    return status;
  }

  // A declared checkpoint is removed through its run directory (a
  // committed one is immutable); anything else, or if that fails, as a tree.
  absl::Status RemoveStep(Target& target, int repeat, const std::string& step) {
    RankIo& io = target.executor->ControlIo();
    if (target.commit_confirmed &&
        io.SetXattr(work_, kRemoveXattr, absl::StrCat("step_", repeat)).ok()) {
      return absl::OkStatus();
    }
    return io.RemoveTree(step);
  }

  absl::Status RunPhases(Target& target, int repeat, const std::string& step) {
    for (Phase phase : kAllPhases) {
      const bool selected = Selected(phase);
      if (phase == Phase::kSave) {
        // The other phases need the data even when save is not reported.
        absl::Status saved = RunSave(target, repeat, step, selected);
        if (!saved.ok()) return saved;
      } else if (phase == Phase::kCommit) {
        if (selected && target.commit) {
          absl::Status committed = RunCommit(target, repeat, step);
          if (!committed.ok()) return committed;
        }
      } else if (selected) {
        absl::Status loaded = RunLoad(target, repeat, phase, step);
        if (!loaded.ok()) return loaded;
      }
    }
    return absl::OkStatus();
  }

  // Runs `task` on `ranks` with progress and CPU accounting.
  absl::StatusOr<RankRun> RunRanks(Target& target, const std::vector<int>& ranks,
                                   const RankTask& task, bool all_at_once, uint64_t base_bytes,
                                   int base_done = 0) {
    return target.executor->Run(ranks, task, all_at_once,
                                [&](int64_t now, uint64_t bytes, int done) {
                                  progress_.Sample(now, base_bytes + bytes, base_done + done);
                                });
  }

  void BeginPhase(const Target& target, int repeat, Phase phase, uint64_t expected) {
    progress_.BeginPhase(target.label, repeat, options_.repeat, phase, expected,
                         options_.spec.ranks, MonotonicNowNs());
  }

  // What a phase moves, for the progress bar.
  uint64_t StormBytes(Phase phase) const {
    const uint64_t bytes =
        RankFileBytes(options_.spec) * static_cast<uint64_t>(options_.spec.ranks);
    return phase == Phase::kSave && options_.spec.kind == WorkloadKind::kDcp
               ? bytes + MetadataFileBytes(options_.spec)
               : bytes;
  }

  void Record(PhaseRecord record, bool report) {
    if (report) result_.records.push_back(std::move(record));
  }

  absl::Status RunSave(Target& target, int repeat, const std::string& step, bool report) {
    const WorkloadSpec& spec = options_.spec;
    const DieHook die = target.executor->ranks_are_processes() ? die_ : DieHook{};
    RankTask save = [&spec, &step, die](int rank, RankIo& io,
                                        ProgressSink& sink) -> absl::StatusOr<RankTimes> {
      if (rank == die.rank) {
        DyingSink dying(sink, die.how);
        return SaveRank(io, spec, rank, step, &dying);
      }
      return SaveRank(io, spec, rank, step, &sink);
    };
    DropCaches();
    TargetCpuMeter target_cpu(target.target_procs);
    target_cpu.Start();
    DiskMeter disk(result_.disk);
    disk.Start();
    BeginPhase(target, repeat, Phase::kSave, StormBytes(Phase::kSave));
    absl::StatusOr<RankRun> run = RunRanks(target, AllRanks(spec.ranks), save, false, 0);
    if (!run.ok()) {
      progress_.EndPhase();
      return TargetError(target, absl::StrCat("save, repeat ", repeat + 1), run.status());
    }
    PhaseRecord record{target.label, repeat, Phase::kSave, run->ranks, run->rank_cpu_s};
    record.rank_system_cpu_s = run->rank_system_cpu_s;
    if (spec.kind == WorkloadKind::kDcp) {
      // Rank 0 finishes the checkpoint after every rank saved (as DCP's
      // coordinator does); its time runs to the end of that.
      uint64_t saved = 0;
      for (const RankRecord& r : record.ranks) saved += r.times.bytes;
      RankTask finalize = [&spec, &step](int, RankIo& io, ProgressSink& sink) {
        return FinalizeSave(io, spec, step, &sink);
      };
      absl::StatusOr<RankRun> fin = RunRanks(target, {0}, finalize, false, saved, spec.ranks - 1);
      if (!fin.ok()) {
        progress_.EndPhase();
        return TargetError(target, absl::StrCat("save (rank 0 finishing), repeat ", repeat + 1),
                           fin.status());
      }
      RankTimes& rank0 = record.ranks[0].times;
      rank0.end_ns = std::max(rank0.end_ns, fin->ranks[0].times.end_ns);
      rank0.bytes += fin->ranks[0].times.bytes;
      record.rank_cpu_s += fin->rank_cpu_s;
      record.rank_system_cpu_s += fin->rank_system_cpu_s;
    }
    progress_.EndPhase();
    record.target_cpu_s = target_cpu.Stop();
    record.disk = disk.Stop();
    Record(std::move(record), report);
    return absl::OkStatus();
  }

  absl::Status RunCommit(Target& target, int repeat, const std::string& step) {
    // Through a mount, ranks commit with getxattr user.ckptfs.commit.R: the
    // kernel holds the directory's lock for a whole setxattr, so the ranks
    // of one mount would queue behind the first waiting setxattr and the
    // barrier could not complete. libckptfs takes the setxattr form.
    const bool by_read = target.executor->ranks_are_processes();
    RankTask commit = [&step, by_read](int rank, RankIo& io,
                                       ProgressSink&) -> absl::StatusOr<RankTimes> {
      RankTimes times;
      times.start_ns = MonotonicNowNs();
      absl::Status status;
      if (by_read) {
        absl::StatusOr<std::string> outcome =
            io.GetXattr(step, absl::StrCat(kCommitXattr, ".", rank));
        status = outcome.status();
        if (outcome.ok() && *outcome != "committed") {
          status = absl::InternalError(
              absl::StrCat("getxattr ", kCommitXattr, ".", rank, " returned \"", *outcome, "\""));
        }
      } else {
        status = io.SetXattr(step, kCommitXattr, absl::StrCat(rank));
      }
      times.end_ns = MonotonicNowNs();
      if (!status.ok()) return status;
      return times;
    };
    TargetCpuMeter target_cpu(target.target_procs);
    target_cpu.Start();
    BeginPhase(target, repeat, Phase::kCommit, 0);
    absl::StatusOr<RankRun> run = RunRanks(target, AllRanks(options_.spec.ranks), commit, true, 0);
    progress_.EndPhase();
    if (!run.ok()) {
      return TargetError(target, absl::StrCat("commit, repeat ", repeat + 1), run.status());
    }
    PhaseRecord record{target.label, repeat, Phase::kCommit, run->ranks, run->rank_cpu_s};
    record.rank_system_cpu_s = run->rank_system_cpu_s;
    record.target_cpu_s = target_cpu.Stop();
    absl::StatusOr<std::string> state = target.executor->ControlIo().GetXattr(step, kStateXattr);
    if (!state.ok() || *state != "committed") {
      return TargetError(target, absl::StrCat("commit, repeat ", repeat + 1),
                         absl::InternalError(absl::StrCat(
                             "every rank's commit returned 0 but ", kStateXattr, " reads ",
                             state.ok() ? absl::StrCat("\"", *state, "\"")
                                        : std::string(state.status().message()))));
    }
    Record(std::move(record), true);
    return absl::OkStatus();
  }

  // sync, then drop the page cache (root only; otherwise one note). Before
  // every save as well as every load: the sync waits out the journal
  // commit that the previous target's removed step (and, on a file system
  // mounted with discard, its discards) left behind, and the drop frees
  // the memory the previous phase cached, so neither target pays for the
  // other's leftovers.
  void DropCaches() {
    ::sync();
    const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
    bool dropped = false;
    if (fd >= 0) {
      dropped = ::write(fd, "3", 1) == 1;
      ::close(fd);
    }
    if (!dropped && !warned_caches_) {
      warned_caches_ = true;
      Note(absl::StrCat("caches not dropped before phases (", ::strerror(errno),
                        "; needs root): loads may be served from the page cache"));
    }
  }

  absl::Status RunLoad(Target& target, int repeat, Phase phase, const std::string& step) {
    const WorkloadSpec& spec = options_.spec;
    const bool broadcast = phase == Phase::kBcast;
    RankTask load = [&spec, &step, broadcast](int rank, RankIo& io, ProgressSink& sink) {
      return LoadRank(io, spec, broadcast ? 0 : rank, step, &sink);
    };
    DropCaches();
    TargetCpuMeter target_cpu(target.target_procs);
    target_cpu.Start();
    DiskMeter disk(result_.disk);
    disk.Start();
    BeginPhase(target, repeat, phase, StormBytes(phase));
    absl::StatusOr<RankRun> run = RunRanks(target, AllRanks(spec.ranks), load, false, 0);
    progress_.EndPhase();
    if (!run.ok()) {
      return TargetError(target, absl::StrCat(PhaseName(phase), ", repeat ", repeat + 1),
                         run.status());
    }
    PhaseRecord record{target.label, repeat, phase, run->ranks, run->rank_cpu_s};
    record.rank_system_cpu_s = run->rank_system_cpu_s;
    record.target_cpu_s = target_cpu.Stop();
    record.disk = disk.Stop();
    // LoadRank compared every byte it read, or failed.
    for (const RankRecord& r : record.ranks) record.verified_bytes += r.times.bytes;
    Record(std::move(record), true);
    return absl::OkStatus();
  }

  const BenchOptions& options_;
  ProgressMeter& progress_;
  const DieHook die_;
  std::string work_;
  std::vector<std::unique_ptr<Target>> targets_;
  BenchResult result_;
  bool warned_caches_ = false;
};

}  // namespace

absl::StatusOr<BenchResult> RunBench(const BenchOptions& options, ProgressMeter& progress) {
  Runner runner(options, progress);
  return runner.Run();
}

}  // namespace ckptfs::bench
