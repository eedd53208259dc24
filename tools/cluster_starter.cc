// See cluster_starter.h.
#include "tools/cluster_starter.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/tcp.h"
#include "tools/data_dir_lock_probe.h"
#include "tools/fuse_mount.h"
#include "tools/interruptible_wait.h"
#include "tools/local_etcd.h"
#include "tools/meta_probe.h"
#include "tools/mounts.h"
#include "tools/ports.h"
#include "tools/process.h"
#include "tools/table.h"

namespace ckptfs::tools {
namespace {

constexpr int kLogTailLines = 25;

// Whether `binary` takes --metrics_listen (another build may not): the flag
// name is in its binary. Reading it rather than running `binary
// --helpfull` cannot hang on a daemon that ignores --helpfull (a stand-in
// in a test, a wrapper script); a binary that only mentions the name
// elsewhere would be told the flag and fail at start-up, with its log shown.
bool SupportsMetrics(const std::string& binary) {
  std::ifstream in(binary, std::ios::binary);
  constexpr absl::string_view kFlag = "metrics_listen";
  std::string window;
  char block[1 << 16];
  while (in.read(block, sizeof(block)) || in.gcount() > 0) {
    // Keep the tail of the previous block so a name split across two is seen.
    window.erase(0, window.size() > kFlag.size() ? window.size() - kFlag.size() : 0);
    window.append(block, static_cast<size_t>(in.gcount()));
    if (absl::StrContains(window, kFlag)) return true;
  }
  return false;
}

class ClusterStarter {
 public:
  // `credential`: the cluster's, read from dir.CredentialFile(); every
  // daemon and the mount are given that file.
  ClusterStarter(UpConfig config, StateDir dir, std::string credential)
      : config_(std::move(config)),
        dir_(std::move(dir)),
        credential_(std::move(credential)),
        probe_(nullptr) {
    state_.meta_address = config_.MetaAddresses();
  }

  int Run() {
    if (config_.on_etcd) {
      if (absl::Status s = StartEtcd(); !s.ok()) return Abort(s);
    }
    if (absl::Status s = StartMeta(); !s.ok()) return Abort(s);
    if (config_.on_etcd) {
      if (absl::Status s = StartStandby(); !s.ok()) return Abort(s);
    }
    if (absl::Status s = StartStorage(); !s.ok()) return Abort(s);
    if (absl::Status s = StartMount(); !s.ok()) return Abort(s);
    // Last, so the daemons before it keep their places (and metrics ports).
    if (config_.repair) {
      if (absl::Status s = StartRepairer(); !s.ok()) return Abort(s);
    }
    PrintSummary();
    return 0;
  }

 private:
  // Starts one daemon, records it and saves the state file.
  // `metrics_port` (0: none) is passed as --metrics_listen when the
  // daemon's build has the flag.
  absl::Status Start(const std::string& role, const std::string& address,
                     const std::string& data_dir, std::vector<std::string> argv,
                     uint16_t metrics_port) {
    DaemonRecord record;
    record.role = role;
    record.address = address;
    record.data_dir = data_dir;
    if (metrics_port != 0 && SupportsMetricsCached(argv[0])) {
      record.metrics_address = config_.Address(metrics_port);
      argv.push_back("--metrics_listen=" + record.metrics_address);
    }
    record.log_path = dir_.LogPath(role);
    failing_log_ = record.log_path;
    absl::StatusOr<ProcessRecord> process = SpawnDetached(argv, record.log_path);
    if (!process.ok()) return process.status();
    record.process = *process;
    state_.daemons.push_back(record);
    return dir_.Save(state_);
  }

  bool SupportsMetricsCached(const std::string& binary) {
    auto [it, fresh] = metrics_support_.try_emplace(binary, false);
    if (fresh) it->second = SupportsMetrics(binary);
    return it->second;
  }

  // The etcd members, each on its own data directory; ready once every
  // client port accepts connections (the metadata service's start waits
  // for a leader).
  absl::Status StartEtcd() {
    std::cout << "starting " << kEtcdMembers << " etcd members on " << config_.host << ":"
              << config_.etcd.ClientPort(0) << ".." << config_.etcd.PeerPort(kEtcdMembers - 1)
              << " ..." << std::endl;
    std::error_code ec;
    std::filesystem::create_directories(config_.etcd.root, ec);
    if (ec) return SyscallError(ec.value(), absl::StrCat("create directory ", config_.etcd.root));
    if (config_.etcd.tls) {
      if (absl::Status s = MakeLocalEtcdTls(config_.etcd); !s.ok()) return s;
    }
    for (int i = 0; i < kEtcdMembers; ++i) {
      if (absl::Status s =
              Start(absl::StrCat("etcd-", i), config_.Address(config_.etcd.ClientPort(i)),
                    config_.etcd.DataDir(i), config_.etcd.Argv(i), 0);
          !s.ok()) {
        return s;
      }
    }
    failing_log_.clear();
    return WaitFor("the etcd members to listen", config_.timeout, [&]() -> absl::StatusOr<bool> {
      for (const DaemonRecord& d : state_.daemons) {
        if (std::optional<std::string> how = ReapIfExited(d.process.pid)) {
          failing_log_ = d.log_path;
          return absl::UnavailableError(
              absl::StrCat(d.role, " (pid ", d.process.pid, ", ", d.address, ") ", *how));
        }
      }
      for (int i = 0; i < kEtcdMembers; ++i) {
        if (!PortAcceptsConnections(config_.host, config_.etcd.ClientPort(i))) return false;
      }
      return true;
    });
  }

  // The metadata server's command line listening on `address`.
  std::vector<std::string> MetaArgv(const std::string& address) const {
    std::vector<std::string> argv = {config_.meta_binary, "--listen=" + address,
                                     "--credential_file=" + dir_.CredentialFile(),
                                     "--server_credential_file=" + dir_.ServerCredentialFile()};
    if (config_.on_etcd) {
      argv.push_back("--kv_backend=etcd");
      argv.push_back("--etcd_endpoints=" + config_.etcd.Endpoints());
      if (config_.etcd.tls) {
        argv.push_back("--etcd_ca_file=" + config_.etcd.CaFile());
        argv.push_back("--etcd_cert_file=" + config_.etcd.ClientCertFile());
        argv.push_back("--etcd_key_file=" + config_.etcd.ClientKeyFile());
      }
      argv.push_back(std::string("--etcd_prefix=") + kLocalEtcdPrefix);
      argv.push_back("--etcd_shared");  // both servers serve at once
    } else {
      argv.push_back("--data_dir=" + dir_.MetaDir());
    }
    if (config_.chunk_size > 0) {
      argv.push_back(absl::StrCat("--default_chunk_size=", config_.chunk_size));
    }
    argv.push_back(absl::StrCat("--replicas=", config_.replicas));
    if (!config_.ec.empty()) argv.push_back("--ec=" + config_.ec);
    if (config_.orphan_grace_s >= 0) {
      argv.push_back(absl::StrCat("--orphan_grace_s=", config_.orphan_grace_s));
    }
    return argv;
  }

  // The second metadata server on etcd, serving beside the first
  // (--etcd_shared): ready when its log says it serves (or, for a server
  // that waits as a standby, that it does).
  absl::Status StartStandby() {
    std::cout << "starting the second metadata server on " << config_.StandbyAddress()
              << " (serving beside the first) ..." << std::endl;
    if (absl::Status s = Start("meta-standby", config_.StandbyAddress(), "",
                               MetaArgv(config_.StandbyAddress()), 0);
        !s.ok()) {
      return s;
    }
    const DaemonRecord& standby = state_.daemons.back();
    const pid_t pid = standby.process.pid;
    const std::string log = standby.log_path;
    return WaitFor(
        "the second metadata server to serve", config_.timeout, [&]() -> absl::StatusOr<bool> {
          if (std::optional<std::string> how = ReapIfExited(pid)) {
            return absl::UnavailableError(
                absl::StrCat("ckptfs-meta standby (pid ", pid, ") ", *how));
          }
          const std::string tail = TailFile(log, kLogTailLines);
          return absl::StrContains(tail, "serving on") || absl::StrContains(tail, "standby");
        });
  }

  absl::Status StartMeta() {
    std::cout << "starting metadata service on " << config_.MetaAddress()
              << (config_.on_etcd ? " (on etcd)" : "") << " ..." << std::endl;
    std::vector<std::string> argv = MetaArgv(config_.MetaAddress());
    if (absl::Status s = Start("meta", config_.MetaAddress(), config_.on_etcd ? "" : dir_.MetaDir(),
                               argv, config_.MetaMetricsPort());
        !s.ok()) {
      return s;
    }
    const pid_t pid = state_.daemons.back().process.pid;
    return WaitFor(
        "the metadata service to answer", config_.timeout, [&]() -> absl::StatusOr<bool> {
          if (std::optional<std::string> how = ReapIfExited(pid)) {
            return absl::UnavailableError(absl::StrCat("ckptfs-meta (pid ", pid, ") ", *how));
          }
          if (probe_ == nullptr) {
            if (!PortAcceptsConnections(config_.host, config_.meta_port)) {
              return false;
            }
            probe_ = std::make_unique<MetaProbe>(config_.MetaAddress(), credential_);
          }
          return probe_->ListServers(absl::Seconds(1)).ok();
        });
  }

  absl::Status StartStorage() {
    std::cout << "starting " << config_.servers << " storage server"
              << (config_.servers == 1 ? "" : "s") << " on " << config_.host << ":"
              << config_.storage_port << ".." << config_.StoragePort(config_.servers - 1) << " ..."
              << std::endl;
    for (int i = 0; i < config_.servers; ++i) {
      const std::string data_dir = dir_.StorageDir(i);
      std::error_code ec;
      std::filesystem::create_directories(data_dir, ec);
      if (ec) return SyscallError(ec.value(), absl::StrCat("create directory ", data_dir));
      const std::string address = config_.Address(config_.StoragePort(i));
      absl::Status s = Start(absl::StrCat("storage-", i), address, data_dir,
                             {config_.storage_binary, "--listen=" + address,
                              "--data_dir=" + data_dir, "--meta=" + config_.StorageMetaAddresses(i),
                              "--credential_file=" + dir_.CredentialFile(),
                              "--server_credential_file=" + dir_.ServerCredentialFile()},
                             config_.metrics_port == 0 ? 0 : config_.StorageMetricsPort(i));
      if (!s.ok()) return s;
    }
    failing_log_.clear();
    return WaitFor(absl::StrCat("all ", config_.servers, " storage servers to register"),
                   config_.timeout, [&]() -> absl::StatusOr<bool> {
                     for (const DaemonRecord& d : state_.daemons) {
                       if (std::optional<std::string> how = ReapIfExited(d.process.pid)) {
                         failing_log_ = d.log_path;
                         return absl::UnavailableError(absl::StrCat(d.role, " (pid ", d.process.pid,
                                                                    ", ", d.address, ") ", *how));
                       }
                     }
                     absl::StatusOr<std::vector<meta::ServerInfo>> servers =
                         probe_->ListServers(absl::Seconds(1));
                     if (!servers.ok()) return false;
                     for (int i = 0; i < config_.servers; ++i) {
                       const uint16_t port = config_.StoragePort(i);
                       const bool registered = std::any_of(
                           servers->begin(), servers->end(), [&](const meta::ServerInfo& info) {
                             absl::StatusOr<HostPort> hp = ParseHostPort(info.address());
                             return info.alive() && hp.ok() && hp->port == port;
                           });
                       if (!registered) return false;
                     }
                     // A registration may predate a restart; make sure each one listens.
                     for (int i = 0; i < config_.servers; ++i) {
                       if (!PortAcceptsConnections(config_.host, config_.StoragePort(i)))
                         return false;
                     }
                     return true;
                   });
  }

  // `ckptfs repair --watch` (this very binary) in the background: restores
  // missing and corrupt copies and moves copies off dead servers.
  absl::Status StartRepairer() {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return SyscallError(errno, "readlink /proc/self/exe");
    self[n] = '\0';
    std::cout << "starting the repairer (ckptfs repair --watch) ..." << std::endl;
    absl::Status s = Start("repair", "", "",
                           {self, "repair", "--watch", "--meta=" + config_.MetaAddresses(),
                            "--credential-file=" + dir_.ServerCredentialFile(),
                            absl::StrCat("--move-after-s=", config_.repair_move_after_s)},
                           0);
    if (!s.ok()) return s;
    // A repairer that cannot start (a bad flag, an unreachable service)
    // exits at once; say so now rather than never repairing.
    const pid_t pid = state_.daemons.back().process.pid;
    absl::SleepFor(absl::Milliseconds(200));
    if (std::optional<std::string> how = ReapIfExited(pid)) {
      return absl::UnavailableError(absl::StrCat("ckptfs repair (pid ", pid, ") ", *how));
    }
    failing_log_.clear();
    return absl::OkStatus();
  }

  absl::Status StartMount() {
    std::cout << "mounting " << config_.mountpoint << " ..." << std::endl;
    if (absl::Status s = PrepareMountpoint(config_.mountpoint); !s.ok()) return s;
    FuseMountOptions options;
    options.fuse_binary = config_.fuse_binary;
    options.meta_address = config_.MetaAddresses();
    options.mountpoint = config_.mountpoint;
    options.credential_file = dir_.CredentialFile();
    state_.mountpoint = config_.mountpoint;
    if (absl::Status s = Start("fuse", config_.mountpoint, "", FuseArgv(options),
                               config_.metrics_port == 0 ? 0 : config_.FuseMetricsPort());
        !s.ok()) {
      return s;
    }
    return WaitForMount(state_.daemons.back().process.pid, config_.mountpoint, config_.timeout);
  }

  // Reports `error`, shows the failing daemon's log, stops everything
  // started so far and forgets it. Returns the exit status 1.
  int Abort(const absl::Status& error) {
    std::cerr << "ckptfs up: " << error.message() << "\n";
    if (!failing_log_.empty()) {
      const std::string tail = TailFile(failing_log_, kLogTailLines);
      std::cerr << "---- last lines of " << failing_log_ << " ----\n"
                << (tail.empty() ? "(empty)" : tail) << "\n----\n";
    }
    if (state_.daemons.empty()) return 1;
    std::cerr << "stopping what was started ...\n";
    if (!state_.mountpoint.empty()) {
      absl::StatusOr<UnmountResult> result =
          UnmountWithRetries(state_.mountpoint, 1, /*lazy=*/true,
                             [](const std::string& line) { std::cerr << "  " << line << "\n"; });
      if (!result.ok()) std::cerr << "  " << result.status().message() << "\n";
    }
    std::vector<ProcessRecord> records;
    for (auto it = state_.daemons.rbegin(); it != state_.daemons.rend(); ++it) {
      records.push_back(it->process);
    }
    std::vector<StopOutcome> outcomes = StopProcesses(records, absl::Seconds(5));
    bool stuck = false;
    for (size_t i = 0; i < outcomes.size(); ++i) {
      const DaemonRecord& d = state_.daemons[state_.daemons.size() - 1 - i];
      std::cerr << "  " << d.role << " (pid " << d.process.pid
                << "): " << StopOutcomeName(outcomes[i]) << "\n";
      stuck |= outcomes[i] == StopOutcome::kStuck || outcomes[i] == StopOutcome::kNotPermitted ||
               outcomes[i] == StopOutcome::kNotVerified;
      // As `ckptfs down` does: a storage server is gone once its LOCK is
      // free. Whoever holds it is stopped, and named: it may be a server
      // this `up` did not start.
      if (absl::StartsWith(d.role, "storage") && !d.data_dir.empty()) {
        absl::StatusOr<DataDirRelease> release =
            EnsureDataDirReleased(d.data_dir, absl::Seconds(5));
        if (!release.ok()) {
          std::cerr << "  " << d.role
                    << ": cannot tell whether it stopped: " << release.status().message() << "\n";
          stuck = true;
          continue;
        }
        for (pid_t pid : release->stopped) {
          std::cerr << "  " << d.role << ": stopped pid " << pid << ", which held " << d.data_dir
                    << "/LOCK"
                    << (pid == d.process.pid
                            ? " (the server this `up` started; its record did not match)"
                            : absl::StrCat(": a process this `up` did not start (it started ",
                                           "pid ", d.process.pid, ")"))
                    << "\n";
        }
        if (!release->released) {
          std::cerr << "  " << d.role << ": " << release->still_held << "\n";
          stuck = true;
        }
      }
    }
    if (!stuck) (void)dir_.Remove();
    return 1;
  }

  void PrintSummary() {
    std::vector<std::vector<std::string>> rows = {
        {"ROLE", "ADDRESS", "PID", "METRICS", "DATA DIR", "LOG"}};
    for (const DaemonRecord& d : state_.daemons) {
      rows.push_back({d.role, d.address, absl::StrCat(d.process.pid),
                      d.metrics_address.empty() ? "-" : "http://" + d.metrics_address + "/metrics",
                      d.data_dir.empty() ? "-" : d.data_dir, d.log_path});
    }
    std::cout << "\nckptfs cluster is up (state: " << dir_.StateFile() << ")\n\n"
              << FormatTable(rows) << "\nmounted at " << config_.mountpoint << "\n"
              << (config_.on_etcd ? "metadata on etcd " + config_.etcd.Endpoints() +
                                        "; the standby takes over when the serving "
                                        "metadata server dies\n"
                                  : "")
              << "other nodes:  ckptfs mount --meta " << config_.MetaAddresses()
              << " --credential-file FILE --mountpoint DIR  (FILE: a copy of "
              << dir_.CredentialFile() << ", mode 0600; " << dir_.ServerCredentialFile()
              << " goes only to storage servers)"
              << (absl::StartsWith(config_.host, "127.") || config_.host == "localhost"
                      ? "  (only this machine reaches " + config_.host +
                            "; start with --host ADDR to serve other nodes)"
                      : "")
              << "\n"
              << "stop it:      ckptfs down --state-dir " << dir_.path() << std::endl;
  }

  UpConfig config_;
  StateDir dir_;
  const std::string credential_;
  // Created once the service accepts connections: a channel that met a
  // refused connection may sit in gRPC's reconnect backoff for seconds.
  std::unique_ptr<MetaProbe> probe_;
  ClusterState state_;
  std::string failing_log_;                      // the log to show if the current step fails
  std::map<std::string, bool> metrics_support_;  // binary -> has --metrics_listen
};

}  // namespace

int StartCluster(UpConfig config, StateDir dir, std::string credential) {
  ClusterStarter starter(std::move(config), std::move(dir), std::move(credential));
  return starter.Run();
}

}  // namespace ckptfs::tools
