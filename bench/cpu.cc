// See cpu.h.
#include "bench/cpu.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ckptfs::bench {
namespace {

double TimevalSeconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

CpuTime Usage(int who) {
  rusage usage{};
  if (::getrusage(who, &usage) != 0) return {};
  return {TimevalSeconds(usage.ru_utime), TimevalSeconds(usage.ru_stime)};
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

}  // namespace

absl::StatusOr<uint64_t> ParseStatCpuTicks(absl::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError("no ')' in /proc/PID/stat");
  }
  // After "pid (comm)": field 3 (state) is the first token; utime is 14.
  std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  constexpr size_t kUtime = 14 - 3, kStime = 15 - 3;
  uint64_t utime = 0, stime = 0;
  if (fields.size() <= kStime || !absl::SimpleAtoi(fields[kUtime], &utime) ||
      !absl::SimpleAtoi(fields[kStime], &stime)) {
    return absl::InvalidArgumentError("malformed /proc/PID/stat");
  }
  return utime + stime;
}

absl::StatusOr<double> ProcessCpuSeconds(pid_t pid) {
  std::string text;
  if (!ReadFile(absl::StrCat("/proc/", pid, "/stat"), &text)) {
    return absl::NotFoundError(absl::StrCat("process ", pid, " is gone"));
  }
  absl::StatusOr<uint64_t> ticks = ParseStatCpuTicks(text);
  if (!ticks.ok()) return ticks.status();
  static const double kTicksPerSecond = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return static_cast<double>(*ticks) / kTicksPerSecond;
}

std::vector<pid_t> ResolveProcesses(const std::vector<std::string>& specs) {
  std::vector<pid_t> pids;
  std::vector<std::string> names;
  for (const std::string& spec : specs) {
    int pid = 0;
    if (absl::SimpleAtoi(spec, &pid) && pid > 0) {
      if (::access(absl::StrCat("/proc/", pid, "/stat").c_str(), R_OK) == 0) pids.push_back(pid);
    } else {
      names.push_back(spec);
    }
  }
  if (!names.empty()) {
    if (DIR* proc = ::opendir("/proc"); proc != nullptr) {
      while (dirent* entry = ::readdir(proc)) {
        int pid = 0;
        if (!absl::SimpleAtoi(entry->d_name, &pid) || pid <= 0) continue;
        std::string comm;
        if (!ReadFile(absl::StrCat("/proc/", pid, "/comm"), &comm)) continue;
        comm = std::string(absl::StripTrailingAsciiWhitespace(comm));
        if (std::find(names.begin(), names.end(), comm) != names.end()) pids.push_back(pid);
      }
      ::closedir(proc);
    }
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

const std::vector<std::string>& CkptfsDaemonNames() {
  static const std::vector<std::string> names = {"ckptfs-fuse", "ckptfs-storage", "ckptfs-meta"};
  return names;
}

std::optional<std::string> FlagValue(const std::vector<std::string>& argv, absl::string_view name) {
  const std::string flag = absl::StrCat("--", name);
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == flag && i + 1 < argv.size()) return argv[i + 1];
    if (absl::StartsWith(argv[i], flag + "=")) return argv[i].substr(flag.size() + 1);
  }
  return std::nullopt;
}

std::optional<int> AddressPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return std::nullopt;
  }
  return port;
}

namespace {

struct ProcessInfo {
  pid_t pid;
  std::string comm;
  std::vector<std::string> argv;
};

std::vector<ProcessInfo> CkptfsProcesses() {
  std::vector<ProcessInfo> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  const std::vector<std::string>& names = CkptfsDaemonNames();
  while (dirent* entry = ::readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid <= 0) continue;
    std::string comm, cmdline;
    if (!ReadFile(absl::StrCat("/proc/", pid, "/comm"), &comm)) continue;
    comm = std::string(absl::StripTrailingAsciiWhitespace(comm));
    if (std::find(names.begin(), names.end(), comm) == names.end()) continue;
    if (!ReadFile(absl::StrCat("/proc/", pid, "/cmdline"), &cmdline)) continue;
    out.push_back(ProcessInfo{pid, comm, absl::StrSplit(cmdline, '\0', absl::SkipEmpty())});
  }
  ::closedir(proc);
  return out;
}

}  // namespace

std::vector<pid_t> FindCkptfsClusterProcesses(const std::string& mountpoint,
                                              std::string meta_address) {
  const std::vector<ProcessInfo> processes = CkptfsProcesses();
  std::vector<pid_t> pids;
  if (!mountpoint.empty()) {
    for (const ProcessInfo& p : processes) {
      if (p.comm != "ckptfs-fuse" || FlagValue(p.argv, "mountpoint") != mountpoint) continue;
      pids.push_back(p.pid);
      if (std::optional<std::string> meta = FlagValue(p.argv, "meta")) meta_address = *meta;
    }
  }
  const std::optional<int> port = AddressPort(meta_address);
  if (port.has_value()) {
    for (const ProcessInfo& p : processes) {
      std::optional<std::string> address;
      if (p.comm == "ckptfs-meta") address = FlagValue(p.argv, "listen");
      if (p.comm == "ckptfs-storage") address = FlagValue(p.argv, "meta");
      if (address.has_value() && AddressPort(*address) == port) pids.push_back(p.pid);
    }
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

std::string DescribeProcesses(const std::vector<pid_t>& pids) {
  std::vector<std::string> parts;
  for (pid_t pid : pids) {
    std::string comm;
    if (!ReadFile(absl::StrCat("/proc/", pid, "/comm"), &comm)) comm = "?";
    parts.push_back(absl::StrCat(absl::StripTrailingAsciiWhitespace(comm), "[", pid, "]"));
  }
  return absl::StrJoin(parts, " ");
}

CpuTime operator-(const CpuTime& a, const CpuTime& b) {
  return {a.user_s - b.user_s, a.system_s - b.system_s};
}

CpuTime ChildrenCpu() { return Usage(RUSAGE_CHILDREN); }
CpuTime SelfCpu() { return Usage(RUSAGE_SELF); }
CpuTime ThreadCpu() { return Usage(RUSAGE_THREAD); }

void TargetCpuMeter::Start() {
  start_.clear();
  for (pid_t pid : ResolveProcesses(specs_)) {
    absl::StatusOr<double> seconds = ProcessCpuSeconds(pid);
    if (seconds.ok()) start_[pid] = *seconds;
  }
}

std::optional<double> TargetCpuMeter::Stop() {
  if (start_.empty()) return std::nullopt;
  double total = 0;
  for (const auto& [pid, before] : start_) {
    absl::StatusOr<double> after = ProcessCpuSeconds(pid);
    if (after.ok() && *after >= before) total += *after - before;
  }
  return total;
}

std::vector<pid_t> TargetCpuMeter::pids() const {
  std::vector<pid_t> pids;
  for (const auto& entry : start_) pids.push_back(entry.first);
  return pids;
}

}  // namespace ckptfs::bench
