// CPU accounting for ckptfs-bench: the ranks' CPU time (children of this
// process, or this process's threads) and the target's own processes
// (read from /proc/PID/stat before and after a phase).
//
// Thread-safety: free functions are thread-safe; a TargetCpuMeter is used by
// one thread.
#ifndef CKPTFS_BENCH_CPU_H_
#define CKPTFS_BENCH_CPU_H_

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

// The ckptfs daemons' names: the --target-procs used on ckptfs when the
// cluster's own processes cannot be told apart.
const std::vector<std::string>& CkptfsDaemonNames();

// The value of flag `name` ("--name=V" or "--name V") in `argv`; none if
// absent.
std::optional<std::string> FlagValue(const std::vector<std::string>& argv, absl::string_view name);
// The port of "host:port" ("[v6]:port"); none if there is no port.
std::optional<int> AddressPort(absl::string_view address);

// The processes of one ckptfs cluster on this machine, found by their
// command lines: with a `mountpoint`, the ckptfs-fuse serving it and the
// metadata address it uses; then the ckptfs-meta listening on that port and
// the ckptfs-storage servers registered with it. With only `meta_address`
// (--native), meta and storage. Sorted pids; empty when none is found.
std::vector<pid_t> FindCkptfsClusterProcesses(const std::string& mountpoint,
                                              std::string meta_address);
// "ckptfs-fuse[979] ckptfs-meta[904]" for people.
std::string DescribeProcesses(const std::vector<pid_t>& pids);

// CPU seconds from getrusage, split into user and system (kernel) time.
struct CpuTime {
  double user_s = 0;
  double system_s = 0;
  double total_s() const { return user_s + system_s; }
};
CpuTime operator-(const CpuTime& a, const CpuTime& b);

// getrusage: reaped children; this whole process; the calling thread.
CpuTime ChildrenCpu();
CpuTime SelfCpu();
CpuTime ThreadCpu();

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

#endif  // CKPTFS_BENCH_CPU_H_
