// `ckptfs up`: starts a local cluster — one metadata service, N storage
// servers and the FUSE mount — with all state under one directory. This file
// parses and checks the flags, and refuses before anything starts what
// would fail later: a cluster of the same state directory still running, a
// storage data directory some other server holds, a busy port
// (tools/up_ports.h), a mountpoint in use. tools/cluster_starter.h starts the
// daemons and waits for each.
// With --meta-backend etcd the metadata lives in a local 3-member etcd
// (tools/local_etcd.h) started first, and two metadata servers serve it at
// once (ckptfs-meta --etcd_shared): "meta" and "meta-standby" (the role name
// of earlier versions, which waited as a standby); one of them runs the
// orphan reclaimer and the other takes it over when it dies. Storage servers
// and the mount are given both ("A,B").
// The first `up` of a state directory creates its credential (DIR/credential,
// mode 0600); every daemon and the mount are given it (--credential_file).
// Runs on main's thread only.
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/meta_channel.h"
#include "tools/cluster_starter.h"
#include "tools/commands.h"
#include "tools/daemon_binaries.h"
#include "tools/data_dir_lock_probe.h"
#include "tools/fuse_mount.h"
#include "tools/interruptible_wait.h"
#include "tools/local_etcd.h"
#include "tools/mounts.h"
#include "tools/process.h"
#include "tools/state_dir.h"
#include "tools/up_config.h"
#include "tools/up_ports.h"

namespace ckptfs::tools {
namespace {

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
  config.etcd.tls = config.on_etcd && LocalEtcdUsesTls(config.etcd);
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
  if (absl::StatusOr<std::string> server = LoadOrCreateCredential(dir->ServerCredentialFile());
      !server.ok()) {
    return Failure(spec, std::string(server.status().message()));
  }
  InstallInterruptHandler();
  return StartCluster(std::move(config), std::move(*dir), *std::move(credential));
}

}  // namespace ckptfs::tools
