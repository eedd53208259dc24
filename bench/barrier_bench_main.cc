// ckptfs-barrier-bench: how the synchronized-commit barrier scales. For each
// rank count it starts a fresh ckptfs-meta (in a temp directory, on a free
// port; or uses --meta), has every rank create and close a file in one
// checkpoint, declares it, sends all N commits at once from this one process
// (asynchronous gRPC calls, no thread per rank) and prints the latency from the
// last arrival to each rank's release (p50/p99/max), and the metadata server's
// CPU time during the declare and commit storm and its peak resident memory.
// Ranks are grouped K to a simulated client (--ranks-per-client): one long poll
// per client, the other ranks' commits no_wait arrivals, as libckptfs coalesces
// them.
//
//   ckptfs-barrier-bench                      # 1024 and 4096 ranks, 8 per client
//   ckptfs-barrier-bench --ranks-per-client 1 # one long poll per rank
//   TMPDIR=/dev/shm ckptfs-barrier-bench      # the clusters on tmpfs (no disk fsync)
//   ckptfs-barrier-bench --ranks 256,1024,4096 --files-per-rank 2
//   ckptfs-barrier-bench --meta 127.0.0.1:7000 --meta-pid 1234 --ranks 4096
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

#include "bench/barrier_storm.h"
#include "bench/cpu.h"
#include "proto/meta.grpc.pb.h"
#include "tools/daemon_binaries.h"
#include "tools/ports.h"
#include "tools/process.h"
#include "tools/table.h"

namespace ckptfs::bench {
namespace {

constexpr char kUsage[] =
    "usage: ckptfs-barrier-bench [--ranks N[,N...]] [--ranks-per-client K]\n"
    "                            [--files-per-rank F] [--channels C]\n"
    "                            [--meta HOST:PORT [--meta-pid PID]]\n"
    "\n"
    "Measures the commit barrier at scale: N ranks commit one checkpoint, all\n"
    "commits sent at once as asynchronous gRPC calls from this process.\n"
    "\n"
    "  --ranks           rank counts to run, one storm each (default 1024,4096)\n"
    "  --ranks-per-client\n"
    "                    ranks per simulated client (mount), as ranks of one\n"
    "                    node share one: its first rank holds the long poll, the\n"
    "                    others send no_wait arrivals (default 8; 1: every rank\n"
    "                    its own long poll)\n"
    "  --files-per-rank  empty files each rank creates and closes in the\n"
    "                    checkpoint first, for the commit to verify (default 1)\n"
    "  --channels        gRPC connections the commits are spread over (default 16)\n"
    "  --meta            use this running metadata service instead of starting\n"
    "                    a fresh ckptfs-meta (and one storage server) per storm\n"
    "                    (then the service's CPU and memory are\n"
    "                    reported only with --meta-pid)\n"
    "  --meta-pid        pid of that service, for its CPU time and peak memory\n"
    "\n"
    "The per-storm clusters live in $TMPDIR (default /tmp): the commit waits\n"
    "for one fsync of the metadata log there.\n"
    "\n"
    "Example: ckptfs-barrier-bench --ranks 1024,4096\n";

struct Flags {
  std::vector<uint32_t> ranks = {1024, 4096};
  uint32_t files_per_rank = 1;
  uint32_t ranks_per_client = 8;
  int channels = 16;
  std::string meta;
  pid_t meta_pid = 0;
};

[[noreturn]] void Usage(const std::string& error) {
  std::fprintf(stderr, "ckptfs-barrier-bench: %s\n\n%s", error.c_str(), kUsage);
  std::exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) Usage(absl::StrCat(arg, " needs a value"));
    const std::string value = argv[++i];
    uint32_t number = 0;
    if (arg == "--ranks") {
      flags.ranks.clear();
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        if (!absl::SimpleAtoi(part, &number) || number == 0 || number > 1048576) {
          Usage(absl::StrCat("--ranks: '", part, "' is not a rank count in 1..1048576"));
        }
        flags.ranks.push_back(number);
      }
    } else if (arg == "--ranks-per-client") {
      if (!absl::SimpleAtoi(value, &flags.ranks_per_client) || flags.ranks_per_client < 1 ||
          flags.ranks_per_client > 1024) {
        Usage("--ranks-per-client takes 1..1024");
      }
    } else if (arg == "--files-per-rank") {
      if (!absl::SimpleAtoi(value, &flags.files_per_rank) || flags.files_per_rank > 64) {
        Usage("--files-per-rank takes 0..64");
      }
    } else if (arg == "--channels") {
      if (!absl::SimpleAtoi(value, &flags.channels) || flags.channels < 1 ||
          flags.channels > 1024) {
        Usage("--channels takes 1..1024");
      }
    } else if (arg == "--meta") {
      flags.meta = value;
    } else if (arg == "--meta-pid") {
      if (!absl::SimpleAtoi(value, &flags.meta_pid) || flags.meta_pid <= 0) {
        Usage("--meta-pid takes a pid");
      }
    } else {
      Usage(absl::StrCat("unknown option ", arg));
    }
  }
  return flags;
}

// VmHWM of /proc/PID/status in bytes (the peak resident set); 0 if unknown.
uint64_t PeakResidentBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    uint64_t kib = 0;
    if (absl::StartsWith(line, "VmHWM:") &&
        absl::SimpleAtoi(
            absl::StripAsciiWhitespace(absl::StripSuffix(absl::string_view(line).substr(6), "kB")),
            &kib)) {
      return kib << 10;
    }
  }
  return 0;
}

// The service's own figure for checkpoint `name`, from its log: the
// milliseconds from the last arrival it counted to the last waiting commit
// it answered (before the replies cross the network); nullopt if absent.
std::optional<double> ServiceReleaseMs(const std::string& log, const std::string& name) {
  std::ifstream in(log);
  std::string line;
  const std::string tag = absl::StrCat("checkpoint ", name, " (");
  const std::string kAnswered = " waiting commits answered ";
  while (std::getline(in, line)) {
    const size_t at = line.find(tag);
    const size_t answered = line.find(kAnswered);
    if (at == std::string::npos || answered == std::string::npos) continue;
    absl::string_view rest = absl::string_view(line).substr(answered + kAnswered.size());
    double ms = 0;
    if (absl::SimpleAtod(rest.substr(0, rest.find(' ')), &ms)) return ms;
  }
  return std::nullopt;
}

// A cluster of its own in a temp directory: a ckptfs-meta and one
// ckptfs-storage (new files need a live server for their layout; the rank
// files stay empty, so the commit's SYNC has no chunks to flush). Stopped
// and removed by the destructor.
class OwnCluster {
 public:
  static absl::StatusOr<std::unique_ptr<OwnCluster>> Start() {
    absl::StatusOr<std::string> meta_binary = tools::FindDaemonBinary(tools::kMetaBinary);
    if (!meta_binary.ok()) return meta_binary.status();
    absl::StatusOr<std::string> storage_binary = tools::FindDaemonBinary(tools::kStorageBinary);
    if (!storage_binary.ok()) return storage_binary.status();
    // $TMPDIR picks the file system whose fsync the commit waits for (the
    // metadata WAL is synced once per commit).
    const char* tmpdir = std::getenv("TMPDIR");
    std::string dir_template = absl::StrCat(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp",
                                            "/ckptfs-barrier-bench-XXXXXX");
    if (mkdtemp(dir_template.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("mkdtemp ", dir_template, " failed"));
    }
    auto cluster = std::unique_ptr<OwnCluster>(new OwnCluster(dir_template));
    std::optional<uint16_t> port = tools::FindFreePortRange("127.0.0.1", 20000, 2, {});
    if (!port) return absl::UnavailableError("no two free ports on 127.0.0.1");
    cluster->address_ = absl::StrCat("127.0.0.1:", *port);
    absl::Status started =
        cluster->Spawn({*meta_binary, absl::StrCat("--listen=", cluster->address_),
                        absl::StrCat("--data_dir=", cluster->dir_, "/meta"), "--replicas=1"},
                       "meta", *port);
    if (!started.ok()) return started;
    started = cluster->Spawn({*storage_binary, absl::StrCat("--listen=127.0.0.1:", *port + 1),
                              absl::StrCat("--data_dir=", cluster->dir_, "/storage"),
                              absl::StrCat("--meta=", cluster->address_)},
                             "storage", *port + 1);
    if (!started.ok()) return started;
    if (absl::Status alive = cluster->AwaitLiveServer(); !alive.ok()) return alive;
    return cluster;
  }
  ~OwnCluster() {
    if (!records_.empty()) tools::StopProcesses(records_, absl::Seconds(10));
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& address() const { return address_; }
  pid_t meta_pid() const { return records_.front().pid; }
  std::string meta_log() const { return dir_ + "/meta.log"; }

 private:
  explicit OwnCluster(std::string dir) : dir_(std::move(dir)) {}

  absl::Status Spawn(const std::vector<std::string>& argv, const std::string& name, uint16_t port) {
    const std::string log = absl::StrCat(dir_, "/", name, ".log");
    absl::StatusOr<tools::ProcessRecord> record = tools::SpawnDetached(argv, log);
    if (!record.ok()) return record.status();
    records_.push_back(*record);
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!tools::PortAcceptsConnections("127.0.0.1", port)) {
      if (std::optional<std::string> exit = tools::ReapIfExited(record->pid)) {
        return absl::InternalError(
            absl::StrCat(argv[0], " ", *exit, ": ", tools::TailFile(log, 5)));
      }
      if (absl::Now() > give_up) {
        return absl::DeadlineExceededError(absl::StrCat(argv[0], " did not start; see ", log));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return absl::OkStatus();
  }

  // Until the metadata service lists the storage server as alive.
  absl::Status AwaitLiveServer() {
    auto stub = meta::MetaService::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      meta::ListServersReply reply;
      if (stub->ListServers(&context, meta::Empty(), &reply).ok()) {
        for (const meta::ServerInfo& server : reply.servers()) {
          if (server.alive()) return absl::OkStatus();
        }
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("the storage server did not register; see ", dir_, "/storage.log"));
  }

  std::string dir_;
  std::string address_;
  std::vector<tools::ProcessRecord> records_;  // meta first
};

int Main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  std::vector<std::vector<std::string>> rows = {
      {"ranks", "ranks/client", "long polls", "declare s", "arrivals s", "release p50 ms",
       "release p99 ms", "release max ms", "service release ms", "meta CPU s", "meta peak RSS"}};
  for (uint32_t ranks : flags.ranks) {
    std::unique_ptr<OwnCluster> own;
    std::string address = flags.meta;
    pid_t pid = flags.meta_pid;
    if (address.empty()) {
      absl::StatusOr<std::unique_ptr<OwnCluster>> started = OwnCluster::Start();
      if (!started.ok()) {
        std::fprintf(stderr, "ckptfs-barrier-bench: %s\n", started.status().ToString().c_str());
        return 1;
      }
      own = std::move(*started);
      address = own->address();
      pid = own->meta_pid();
    }
    BarrierStormOptions options;
    options.meta_address = address;
    options.ranks = ranks;
    options.files_per_rank = flags.files_per_rank;
    options.ranks_per_client = flags.ranks_per_client;
    options.channels = flags.channels;
    options.name =
        absl::StrCat("barrier-bench-", getpid(), "-", ranks, "-", absl::ToUnixMillis(absl::Now()));
    std::fprintf(stderr, "ckptfs-barrier-bench: %u ranks, %u per client, against %s...\n", ranks,
                 flags.ranks_per_client, address.c_str());
    // The files' creation is not the barrier's work: CPU is sampled from the
    // declare on.
    double cpu_before = 0;
    options.before_declare = [&] {
      if (pid > 0) cpu_before = ProcessCpuSeconds(pid).value_or(0);
    };
    absl::StatusOr<BarrierStormResult> result = RunBarrierStorm(options);
    const double cpu_after = pid > 0 ? ProcessCpuSeconds(pid).value_or(0) : 0;
    if (!result.ok()) {
      std::fprintf(stderr, "ckptfs-barrier-bench: %u ranks: %s\n", ranks,
                   result.status().ToString().c_str());
      return 1;
    }
    const std::optional<double> service_ms =
        own != nullptr ? ServiceReleaseMs(own->meta_log(), options.name) : std::nullopt;
    rows.push_back({absl::StrCat(ranks), absl::StrCat(result->ranks_per_client),
                    absl::StrCat(result->long_polls), absl::StrFormat("%.4f", result->declare_s),
                    absl::StrFormat("%.3f", result->arrivals_s),
                    absl::StrFormat("%.1f", result->release_p50_s * 1e3),
                    absl::StrFormat("%.1f", result->release_p99_s * 1e3),
                    absl::StrFormat("%.1f", result->release_max_s * 1e3),
                    service_ms ? absl::StrFormat("%.1f", *service_ms) : "-",
                    pid > 0 ? absl::StrFormat("%.2f", cpu_after - cpu_before) : "-",
                    pid > 0 ? tools::FormatBytes(PeakResidentBytes(pid)) : "-"});
  }
  std::fputs(tools::FormatTable(rows).c_str(), stdout);
  std::fputs(
      "release: from the last commit sent to the reply of the rank's client's long "
      "poll (this process and the service share the machine's cores); a client's other "
      "ranks send no_wait arrivals. service release: the service's own log, from the "
      "last arrival it counted to the last waiting commit it answered. meta CPU s: the "
      "service's CPU time from the declare to the last release.\n",
      stdout);
  return 0;
}

}  // namespace
}  // namespace ckptfs::bench

int main(int argc, char** argv) { return ckptfs::bench::Main(argc, argv); }
