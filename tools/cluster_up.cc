// `ckptfs up`: starts a local cluster — one metadata service, N storage
// servers and the FUSE mount — with all state under one directory, waits
// until each part is ready, and records what it started in cluster.state
// (after every daemon, so `ckptfs down` can always clean up). If a step
// fails it prints the failing daemon's log tail and stops what it started
// (and any process still holding the LOCK of a data directory it gave a
// storage server, which it names). A storage data directory some other
// server holds is refused before anything starts.
// Each daemon whose build has --metrics_listen (its binary names the flag,
// so older daemons still start) serves Prometheus metrics on a port of its own
// from --metrics-port on; the ports are recorded and printed.
// With --meta-backend etcd the metadata lives in a local 3-member etcd
// (tools/local_etcd.h) started first, and two metadata servers serve it at
// once (ckptfs-meta --etcd_shared): "meta" and "meta-standby" (the role name
// of earlier versions, which waited as a standby); one of them runs the
// orphan reclaimer and the other takes it over when it dies. Storage servers
// and the mount are given both ("A,B").
// The first `up` of a state directory creates its credential (DIR/credential,
// mode 0600); every daemon and the mount are given it (--credential_file).
// Runs on main's thread only.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/meta_channel.h"
#include "common/net.h"
#include "tools/commands.h"
#include "tools/daemon_binaries.h"
#include "tools/data_dir_lock_probe.h"
#include "tools/fuse_mount.h"
#include "tools/local_etcd.h"
#include "tools/meta_probe.h"
#include "tools/mounts.h"
#include "tools/ports.h"
#include "tools/process.h"
#include "tools/state_dir.h"
#include "tools/table.h"
#include "tools/waiting.h"

namespace ckptfs::tools {
namespace {

constexpr int kMaxServers = 64;
constexpr int kLogTailLines = 25;

struct UpConfig {
  std::string host;
  uint16_t meta_port = 0;
  uint16_t storage_port = 0;
  int servers = 0;
  int64_t chunk_size = 0;             // 0: the metadata service's default
  int replicas = 2;                   // copies of each chunk of new files
  std::string ec;                     // "K+M": erasure-code new files instead ("" none)
  int64_t orphan_grace_s = -1;        // < 0: the metadata service's default
  int64_t repair_move_after_s = 600;  // the repairer's --move-after-s
  bool repair = true;                 // start the repairer (--no-repair: not)
  uint16_t metrics_port = 0;          // 0: no metrics endpoints
  absl::Duration timeout;
  std::string mountpoint;  // absolute
  std::string meta_binary, storage_binary, fuse_binary;
  // --meta-backend etcd: the etcd members and the standby's port.
  bool on_etcd = false;
  LocalEtcd etcd;
  uint16_t standby_port = 0;

  std::string Address(uint16_t port) const { return HostPort{host, port}.ToString(); }
  // The serving metadata server's address ("meta").
  std::string MetaAddress() const { return Address(meta_port); }
  std::string StandbyAddress() const { return Address(standby_port); }
  // What storage servers, the mount and the tools are given: every
  // metadata server.
  std::string MetaAddresses() const {
    return on_etcd ? MetaAddress() + "," + StandbyAddress() : MetaAddress();
  }
  // Storage server i's list: on etcd, odd ones start at the second server
  // (both serve: their registrations and heartbeats spread).
  std::string StorageMetaAddresses(int i) const {
    return on_etcd && i % 2 == 1 ? StandbyAddress() + "," + MetaAddress() : MetaAddresses();
  }
  uint16_t StoragePort(int i) const { return static_cast<uint16_t>(storage_port + i); }
  // Metrics ports: the service at the base, storage server i at base+1+i,
  // the mount after them.
  uint16_t MetaMetricsPort() const { return metrics_port; }
  uint16_t StorageMetricsPort(int i) const { return static_cast<uint16_t>(metrics_port + 1 + i); }
  uint16_t FuseMetricsPort() const { return static_cast<uint16_t>(metrics_port + 1 + servers); }
};

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

// Every metrics port must be free too; a busy one is reported with a free
// base to pass instead.
absl::Status CheckMetricsPorts(const UpConfig& config) {
  if (config.metrics_port == 0) return absl::OkStatus();
  std::vector<uint16_t> busy;
  for (int i = 0; i < config.servers + 2; ++i) {
    const uint16_t port = static_cast<uint16_t>(config.metrics_port + i);
    if (!CheckPortFree(config.host, port).ok()) busy.push_back(port);
  }
  if (busy.empty()) return absl::OkStatus();
  std::vector<uint16_t> taken = {config.meta_port};
  for (int i = 0; i < config.servers; ++i) taken.push_back(config.StoragePort(i));
  std::optional<uint16_t> alt =
      FindFreePortRange(config.host, config.metrics_port, config.servers + 2, taken);
  return absl::FailedPreconditionError(absl::StrCat(
      busy.size() == 1 ? "metrics port " : "metrics ports ", absl::StrJoin(busy, ", "),
      " (--metrics-port ", config.metrics_port, "..", config.metrics_port + config.servers + 1,
      ") on ", config.host, busy.size() == 1 ? " is" : " are", " already in use",
      alt ? absl::StrCat("; pass --metrics-port ", *alt) : "",
      ", or --metrics-port 0 for no metrics endpoints"));
}

// Every port must be free before anything starts; a busy one is reported
// with a free alternative to pass instead.
absl::Status CheckPorts(const UpConfig& config) {
  absl::Status meta = CheckPortFree(config.host, config.meta_port);
  if (!meta.ok() && ErrnoFromStatus(meta) != EADDRINUSE) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on ", config.MetaAddress(), ": ", meta.message(),
                     " (is --host ", config.host, " an address of this machine?)"));
  }
  std::vector<uint16_t> busy;
  for (int i = 0; i < config.servers; ++i) {
    if (!CheckPortFree(config.host, config.StoragePort(i)).ok()) {
      busy.push_back(config.StoragePort(i));
    }
  }
  if (meta.ok() && busy.empty()) return absl::OkStatus();

  // Suggest a storage range first, then a meta port outside it, so that
  // passing both suggestions works.
  std::optional<uint16_t> storage_alt = config.storage_port;
  if (!busy.empty()) {
    storage_alt =
        FindFreePortRange(config.host, config.storage_port, config.servers, {config.meta_port});
  }
  std::vector<uint16_t> storage_ports;
  for (int i = 0; storage_alt && i < config.servers; ++i) {
    storage_ports.push_back(static_cast<uint16_t>(*storage_alt + i));
  }
  std::vector<std::string> problems;
  if (!meta.ok()) {
    std::optional<uint16_t> alt =
        FindFreePortRange(config.host, config.meta_port, 1, storage_ports);
    problems.push_back(absl::StrCat("port ", config.meta_port, " (metadata service) on ",
                                    config.host, " is already in use",
                                    alt ? absl::StrCat("; pass --meta-port ", *alt) : ""));
  }
  if (!busy.empty()) {
    problems.push_back(absl::StrCat(
        busy.size() == 1 ? "port " : "ports ", absl::StrJoin(busy, ", "), " (storage servers use ",
        config.storage_port, "..", config.StoragePort(config.servers - 1), ") on ", config.host,
        busy.size() == 1 ? " is" : " are", " already in use",
        storage_alt ? absl::StrCat("; pass --storage-port ", *storage_alt) : ""));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(absl::StrJoin(problems, "\n  "),
                   "\n  (another ckptfs cluster or another program listens there; `ss -ltnp` "
                   "shows which)"));
}

// --meta-backend etcd: the standby's port and the etcd members' ports must
// be free and must not collide with the others.
absl::Status CheckEtcdPorts(const UpConfig& config) {
  if (!config.on_etcd) return absl::OkStatus();
  std::vector<std::pair<uint16_t, std::string>> used = {{config.meta_port, "--meta-port"}};
  for (int i = 0; i < config.servers; ++i)
    used.push_back({config.StoragePort(i), "--storage-port"});
  if (config.metrics_port != 0) {
    for (int i = 0; i < config.servers + 2; ++i) {
      used.push_back({static_cast<uint16_t>(config.metrics_port + i), "--metrics-port"});
    }
  }
  std::vector<std::pair<uint16_t, std::string>> mine = {{config.standby_port, "--standby-port"}};
  for (int i = 0; i < kEtcdMembers; ++i) {
    mine.push_back({config.etcd.ClientPort(i), "--etcd-port"});
    mine.push_back({config.etcd.PeerPort(i), "--etcd-port"});
  }
  for (const auto& [port, flag] : mine) {
    for (const auto& [other, other_flag] : used) {
      if (port == other) {
        return absl::InvalidArgumentError(absl::StrCat(
            "port ", port, " (", flag, ") is also used by ", other_flag,
            " (etcd members use --etcd-port..--etcd-port+", 2 * kEtcdMembers - 1, ")"));
      }
    }
    used.push_back({port, flag});
  }
  for (const auto& [port, flag] : mine) {
    if (!CheckPortFree(config.host, port).ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "port ", port, " (", flag, ") on ", config.host,
          " is already in use (another etcd or ckptfs cluster? `ss -ltnp` shows which); pass ",
          flag, " with another port"));
    }
  }
  return absl::OkStatus();
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
                                     "--credential_file=" + dir_.CredentialFile()};
    if (config_.on_etcd) {
      argv.push_back("--kv_backend=etcd");
      argv.push_back("--etcd_endpoints=" + config_.etcd.Endpoints());
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
                              "--credential_file=" + dir_.CredentialFile()},
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
                            "--credential-file=" + dir_.CredentialFile(),
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
              << dir_.CredentialFile() << ", mode 0600)"
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

// A cluster recorded in `dir` that still runs is an error; a dead one is
// cleared away (its stale mount detached) so that `up` can start afresh.
absl::Status ClearPreviousCluster(const StateDir& dir) {
  absl::StatusOr<std::optional<ClusterState>> previous = dir.Load();
  if (!previous.ok()) return previous.status();
  if (!previous->has_value()) return absl::OkStatus();
  const ClusterState& state = **previous;
  std::vector<std::string> running;
  for (const DaemonRecord& d : state.daemons) {
    const RecordMatch match = MatchRecord(d.process);
    if (match == RecordMatch::kSame || match == RecordMatch::kOtherExecutable) {
      running.push_back(absl::StrCat(d.role, " pid ", d.process.pid));
      continue;
    }
    // A storage server its record fails to name still holds its data
    // directory (an unreadable LOCK is left to the new server to report).
    if (absl::StartsWith(d.role, "storage") && !d.data_dir.empty() &&
        DataDirLocked(d.data_dir).value_or(false)) {
      std::vector<pid_t> holders = DataDirLockHolders(d.data_dir);
      running.push_back(absl::StrCat(d.role, holders.empty() ? "" : " pid ",
                                     absl::StrJoin(holders, ","), " holding ", d.data_dir,
                                     "/LOCK"));
    }
  }
  if (!running.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the cluster of ", dir.path(), " is still running (",
                     absl::StrJoin(running, ", "), "; metadata service ", state.meta_address,
                     state.mountpoint.empty() ? "" : ", mounted at " + state.mountpoint,
                     ")\n  stop it first with: ckptfs down --state-dir ", dir.path()));
  }
  std::cout << "the previous cluster of " << dir.path()
            << " is no longer running; starting it again" << std::endl;
  if (!state.mountpoint.empty()) {
    std::optional<MountEntry> mount = FindMount(state.mountpoint);
    if (mount.has_value() && mount->is_fuse()) {
      absl::Status s = FuseUnmount(state.mountpoint, /*lazy=*/true);
      if (!s.ok()) return s;
      std::cout << "detached the stale mount at " << state.mountpoint << std::endl;
    }
  }
  return dir.Remove();
}

// A ckptfs-storage that this `up` did not start (one of an earlier cluster
// whose cluster.state is gone, say) must not hold a data directory `up` is
// about to give a server. Refused before anything starts, in the words the
// server itself would use (server/storage/data_dir.cc), rather than let the
// new server fail on it and the abort path stop the old one. An unreadable
// LOCK is left to the new server to report.
absl::Status CheckStorageDirsFree(const StateDir& dir, int servers) {
  for (int i = 0; i < servers; ++i) {
    const std::string data_dir = dir.StorageDir(i);
    if (!DataDirLocked(data_dir).value_or(false)) continue;
    const std::vector<pid_t> holders = DataDirLockHolders(data_dir);
    return ErrnoStatus(
        EBUSY,
        absl::StrCat(
            "data directory ", data_dir, " is in use by another ckptfs-storage",
            holders.empty() ? "" : absl::StrCat(" (pid ", absl::StrJoin(holders, ", "), ")"),
            ": it holds ", data_dir, "/LOCK\n  nothing was started; stop that ", "server first"));
  }
  return absl::OkStatus();
}

// Storage data directories beyond --servers hold chunks no server will
// serve this time; say so rather than let reads fail mysteriously later.
void WarnAboutUnusedStorageDirs(const StateDir& dir, int servers) {
  std::vector<std::string> unused;
  int needed = servers;
  for (int i = servers; i < kMaxServers; ++i) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir.StorageDir(i), ec) ||
        std::filesystem::is_empty(dir.StorageDir(i), ec)) {
      continue;
    }
    unused.push_back(dir.StorageDir(i));
    needed = i + 1;
  }
  if (unused.empty()) return;
  std::cerr << "ckptfs up: warning: " << absl::StrJoin(unused, ", ")
            << " hold data of an earlier cluster with more storage servers, but --servers "
            << servers << " does not start them; files with chunks there will not be "
            << "readable (pass --servers " << needed << ")" << std::endl;
}

}  // namespace

CommandSpec UpSpec() {
  return CommandSpec{
      "up",
      "Start a local ckptfs cluster (1 metadata service + N storage servers) and mount it.",
      "All state (data, logs, cluster.state) lives under --state-dir; `up` again\n"
      "after `down` with the same --state-dir finds the data again. Storage server\n"
      "i listens on --storage-port + i. Stop the cluster with `ckptfs down`.\n"
      "Metrics: each daemon whose build has --metrics_listen serves Prometheus\n"
      "metrics at http://HOST:PORT/metrics: the metadata service on --metrics-port,\n"
      "storage server i on --metrics-port + 1 + i, the mount on --metrics-port +\n"
      "N + 1; the ports are printed and kept in cluster.state.",
      {
          {"state-dir", "DIR", "directory for the cluster's data, logs and state", "", true},
          {"mountpoint", "DIR", "where to mount the filesystem (created if missing)", "", true},
          {"host", "ADDR", "address every daemon listens on", "127.0.0.1"},
          {"meta-port", "PORT", "metadata service port", "7000"},
          {"storage-port", "PORT", "first storage server port", "7001"},
          {"servers", "N", "number of storage servers", "4"},
          {"chunk-size", "BYTES",
           "default chunk size of new files (metadata service default: 4 MiB)"},
          {"replicas", "R",
           "copies of each chunk of new files, on R different storage servers (1..8, at most "
           "--servers); the default 2 survives the loss of any one storage server",
           "2"},
          {"ec", "K+M",
           "erasure-code new files instead of copying them: K data and M parity fragments "
           "per chunk, each on its own storage server (needs --servers >= K+M; one more "
           "keeps new files writable with a server down), surviving the loss of any M"},
          {"timeout-s", "SECONDS", "how long to wait for each part to become ready", "30"},
          {"orphan-grace-s", "S",
           "how long the chunks of a deleted file stay readable by handles still open "
           "(the metadata service's --orphan_grace_s; its default: 3600)"},
          {"meta-backend", "NAME",
           "where the metadata lives: rocksdb (one metadata server, in DIR/meta) or etcd "
           "(a local 3-member etcd in DIR/etcd and two metadata servers on it, both "
           "serving; either carries on when the other dies)",
           "rocksdb"},
          {"standby-port", "PORT", "--meta-backend etcd: the standby metadata server's port",
           "7100"},
          {"etcd-port", "BASE",
           "--meta-backend etcd: etcd member i serves clients on BASE+2i, peers on BASE+2i+1",
           "2379"},
          {"repair-move-after-s", "S",
           "the repairer (`ckptfs repair --watch`, started with the cluster) moves the "
           "copies of a storage server dead this long onto another one",
           "600"},
          {"no-repair", "", "do not start the repairer (`ckptfs repair --watch`)"},
          {"metrics-port", "BASE",
           "Prometheus metrics: the metadata service on BASE, storage server i on "
           "BASE+1+i, the mount after them; 0: none",
           "9400"},
      }};
}

int RunUp(const ParsedFlags& flags) {
  static const CommandSpec spec = UpSpec();
  UpConfig config;
  config.host = flags.Get("host");
  absl::StatusOr<int64_t> meta_port = flags.GetInt("meta-port", 1, 65535);
  absl::StatusOr<int64_t> storage_port = flags.GetInt("storage-port", 1, 65535);
  absl::StatusOr<int64_t> servers = flags.GetInt("servers", 1, kMaxServers);
  absl::StatusOr<int64_t> timeout = flags.GetInt("timeout-s", 1, 3600);
  for (const absl::Status& s :
       {meta_port.status(), storage_port.status(), servers.status(), timeout.status()}) {
    if (!s.ok()) return UsageError(spec, std::string(s.message()));
  }
  if (flags.Given("chunk-size")) {
    absl::StatusOr<int64_t> chunk = flags.GetInt("chunk-size", 4096, int64_t{1} << 30);
    if (!chunk.ok()) return UsageError(spec, std::string(chunk.status().message()));
    config.chunk_size = *chunk;
  }
  absl::StatusOr<int64_t> replicas = flags.GetInt("replicas", 1, 8);
  if (!replicas.ok()) return UsageError(spec, std::string(replicas.status().message()));
  if (*replicas > *servers) {
    return UsageError(spec, absl::StrCat("--replicas ", *replicas, " needs at least ", *replicas,
                                         " storage servers (--servers is ", *servers, ")"));
  }
  config.replicas = static_cast<int>(*replicas);
  if (flags.Given("ec")) {
    const std::string ec = flags.Get("ec");
    std::vector<std::string> parts = absl::StrSplit(ec, '+');
    int k = 0, m = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &k) || !absl::SimpleAtoi(parts[1], &m) ||
        k < 2 || m < 1 || k + m > 32) {
      return UsageError(spec, absl::StrCat("--ec ", ec,
                                           ": want K+M with K >= 2, M >= 1 and "
                                           "K + M <= 32, e.g. 4+2"));
    }
    if (k + m > *servers) {
      return UsageError(spec, absl::StrCat("--ec ", ec, " needs at least ", k + m,
                                           " storage servers (--servers is ", *servers, ")"));
    }
    config.ec = absl::StrCat(k, "+", m);
  }
  if (flags.Given("orphan-grace-s")) {
    absl::StatusOr<int64_t> grace = flags.GetInt("orphan-grace-s", 0, int64_t{1} << 31);
    if (!grace.ok()) return UsageError(spec, std::string(grace.status().message()));
    config.orphan_grace_s = *grace;
  }
  absl::StatusOr<int64_t> metrics_port = flags.GetInt("metrics-port", 0, 65535);
  if (!metrics_port.ok()) return UsageError(spec, std::string(metrics_port.status().message()));
  absl::StatusOr<int64_t> move_after = flags.GetInt("repair-move-after-s", 0, 365LL * 24 * 3600);
  if (!move_after.ok()) return UsageError(spec, std::string(move_after.status().message()));
  config.repair_move_after_s = *move_after;
  config.repair = !flags.GetBool("no-repair");
  config.meta_port = static_cast<uint16_t>(*meta_port);
  config.storage_port = static_cast<uint16_t>(*storage_port);
  config.servers = static_cast<int>(*servers);
  config.timeout = absl::Seconds(*timeout);
  config.metrics_port = static_cast<uint16_t>(*metrics_port);
  if (*metrics_port != 0) {
    const int64_t last = *metrics_port + *servers + 1;
    if (last > 65535)
      return UsageError(spec, "--metrics-port + --servers + 1 goes past port 65535");
    auto overlaps = [&](int64_t lo, int64_t hi) { return lo <= last && *metrics_port <= hi; };
    if (overlaps(*meta_port, *meta_port) || overlaps(*storage_port, *storage_port + *servers - 1)) {
      return UsageError(spec, absl::StrCat("the metrics ports ", *metrics_port, "..", last,
                                           " overlap the metadata or storage ports"));
    }
  }
  if (*storage_port + *servers - 1 > 65535) {
    return UsageError(spec, "--storage-port + --servers goes past port 65535");
  }
  if (*meta_port >= *storage_port && *meta_port < *storage_port + *servers) {
    return UsageError(spec,
                      absl::StrCat("--meta-port ", *meta_port, " falls inside the storage ports ",
                                   *storage_port, "..", *storage_port + *servers - 1));
  }
  config.mountpoint = AbsolutePath(flags.Get("mountpoint"));
  std::string backend = flags.Get("meta-backend");
  // A state directory that holds etcd data was started on etcd: `up`
  // without --meta-backend must not start an empty RocksDB namespace there.
  std::error_code etcd_ec;
  if (!flags.Given("meta-backend") &&
      std::filesystem::is_directory(AbsolutePath(flags.Get("state-dir")) + "/etcd/member-0",
                                    etcd_ec)) {
    std::cout << "the metadata of " << AbsolutePath(flags.Get("state-dir"))
              << " is in etcd (etcd/ there); using --meta-backend etcd" << std::endl;
    backend = "etcd";
  }
  if (backend != "rocksdb" && backend != "etcd") {
    return UsageError(spec,
                      absl::StrCat("--meta-backend must be rocksdb or etcd, not '", backend, "'"));
  }
  config.on_etcd = backend == "etcd";
  if (config.on_etcd) {
    absl::StatusOr<int64_t> standby_port = flags.GetInt("standby-port", 1, 65535);
    absl::StatusOr<int64_t> etcd_port = flags.GetInt("etcd-port", 1, 65535 - 2 * kEtcdMembers + 1);
    for (const absl::Status& s : {standby_port.status(), etcd_port.status()}) {
      if (!s.ok()) return UsageError(spec, std::string(s.message()));
    }
    config.standby_port = static_cast<uint16_t>(*standby_port);
    config.etcd.host = config.host;
    config.etcd.base_port = static_cast<uint16_t>(*etcd_port);
    // Storage servers and the mount reach the metadata servers through one
    // gRPC channel over both addresses, which takes numeric addresses.
    if (absl::StatusOr<std::string> target = MetaChannelTarget(config.MetaAddresses());
        !target.ok()) {
      return UsageError(spec, absl::StrCat("--meta-backend etcd needs a numeric --host (or "
                                           "localhost): ",
                                           target.status().message()));
    }
    absl::StatusOr<std::string> etcd = FindEtcdBinary();
    if (!etcd.ok()) return Failure(spec, std::string(etcd.status().message()));
    config.etcd.binary = *etcd;
  }

  for (auto [name, path] : {std::pair{kMetaBinary, &config.meta_binary},
                            std::pair{kStorageBinary, &config.storage_binary},
                            std::pair{kFuseBinary, &config.fuse_binary}}) {
    absl::StatusOr<std::string> found = FindDaemonBinary(name);
    if (!found.ok()) return Failure(spec, std::string(found.status().message()));
    *path = *found;
  }

  absl::StatusOr<StateDir> dir = StateDir::Open(flags.Get("state-dir"), /*create=*/true);
  if (!dir.ok()) return Failure(spec, std::string(dir.status().message()));
  if (absl::Status s = dir->Lock(); !s.ok()) return Failure(spec, std::string(s.message()));
  if (absl::Status s = ClearPreviousCluster(*dir); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  if (absl::Status s = CheckStorageDirsFree(*dir, config.servers); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  WarnAboutUnusedStorageDirs(*dir, config.servers);
  config.etcd.root = dir->path() + "/etcd";
  if (absl::Status s = CheckPorts(config); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  if (absl::Status s = CheckMetricsPorts(config); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  if (absl::Status s = CheckEtcdPorts(config); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  // Before anything starts: the mountpoint must be a free directory.
  if (absl::Status s = PrepareMountpoint(config.mountpoint); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  // Made by the first `up` of this state directory and kept: restarts keep
  // the cluster's credential, and copies given to other nodes stay valid.
  absl::StatusOr<std::string> credential = LoadOrCreateCredential(dir->CredentialFile());
  if (!credential.ok()) return Failure(spec, std::string(credential.status().message()));
  InstallInterruptHandler();
  ClusterStarter starter(std::move(config), std::move(*dir), *std::move(credential));
  return starter.Run();
}

}  // namespace ckptfs::tools
