// CPU accounting for ckptfs-bench: the ranks' CPU time (children of this
// process, or this process's threads) and the target's own processes
// (read from /proc/PID/stat before and after a phase).
//
// Thread-safety: free functions are thread-safe; a TargetCpuMeter is used by
// one thread.
#ifndef CKPTFS_TOOLS_BENCH_CPU_H_
#define CKPTFS_TOOLS_BENCH_CPU_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs::bench {

// utime + stime (fields 14 and 15, clock ticks) from the text of
// /proc/PID/stat, whose second field (comm, in parentheses) may itself hold
// spaces and parentheses. InvalidArgument when it does not parse.
absl::StatusOr<uint64_t> ParseStatCpuTicks(absl::string_view stat);

// CPU seconds (user + system) a live process has used; NotFound if gone.
absl::StatusOr<double> ProcessCpuSeconds(pid_t pid);

// Pids of `specs`: each is a pid ("1234", kept if it exists) or a process
// name matched exactly against /proc/PID/comm. Sorted, without repeats.
std::vector<pid_t> ResolveProcesses(const std::vector<std::string>& specs);

// The ckptfs daemons' names, the default --target-procs on ckptfs.
const std::vector<std::string>& CkptfsDaemonNames();

// getrusage: reaped children; this whole process; the calling thread.
double ChildrenCpuSeconds();
double SelfCpuSeconds();
double ThreadCpuSeconds();

// The CPU seconds a set of processes spends between Start and Stop.
class TargetCpuMeter {
 public:
  explicit TargetCpuMeter(std::vector<std::string> specs) : specs_(std::move(specs)) {}
  // Resolves the processes now (daemons may have restarted since the last
  // phase) and reads their counters.
  void Start();
  // Seconds spent since Start by the processes found then; a process that
  // exited counts 0. None when Start found no process.
  std::optional<double> Stop();
  // The pids Start found.
  std::vector<pid_t> pids() const;

 private:
  std::vector<std::string> specs_;
  std::map<pid_t, double> start_;  // pid -> CPU seconds at Start
};

}  // namespace ckptfs::bench

#endif  // CKPTFS_TOOLS_BENCH_CPU_H_
