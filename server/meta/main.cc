// ckptfs-meta: the metadata service daemon.
//
//   ckptfs-meta --listen=127.0.0.1:7000 --data_dir=DIR [--orphan_grace_s=3600]
//               [--server_timeout_s=10] [--default_chunk_size=4194304] [--replicas=2]
//               [--reclaim_interval_s=5] [--commit_timeout_s=600]
//               [--sync_commits] [--log_level=info] [--metrics_listen=HOST:PORT]
//   ckptfs-meta --kv_backend=etcd --etcd_endpoints=HOST:PORT,... [--etcd_prefix=/ckptfs/]
//
// With etcd, one server serves a prefix at a time (EtcdServerLock): a second
// one started on the same prefix waits as a standby and takes over when the
// first dies (within --etcd_lock_ttl_s); a server that loses its lock exits 1.
// With --etcd_shared every server on the prefix serves at once (clients
// spread over them); the lock then only decides which one runs the
// once-per-cluster duties (the orphan reclaimer), taken over by another
// within --etcd_lock_ttl_s when it dies (EtcdDutyLock).
//
// Logs "ckptfs-meta: serving on ADDR" once it accepts calls. Exit status: 0
// after SIGTERM/SIGINT (clean shutdown); 2 when the port or the data dir is
// already in use; 1 for any other startup failure (bad flags included).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/metrics/http_server.h"
#include "server/meta/etcd/etcd_client.h"
#include "server/meta/etcd/etcd_duty_lock.h"
#include "server/meta/etcd/etcd_kv_store.h"
#include "server/meta/etcd/etcd_server_lock.h"
#include "server/meta/etcd/etcd_serving_mode.h"
#include "server/meta/meta_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7000", "host:port to serve the metadata gRPC API on");
ABSL_FLAG(std::string, data_dir, "",
          "directory of the metadata store (created if missing); --kv_backend=rocksdb only");
ABSL_FLAG(std::string, kv_backend, "rocksdb",
          "where the metadata lives: rocksdb (embedded, in --data_dir) or etcd (an etcd v3 "
          "cluster, --etcd_endpoints)");
ABSL_FLAG(std::string, etcd_ca_file, "",
          "with --kv_backend=etcd: PEM file of the CA that signed the etcd members' "
          "certificates; set, the service talks TLS to etcd; empty: plain text");
ABSL_FLAG(std::string, etcd_cert_file, "",
          "with --etcd_ca_file: PEM file of the client certificate this service presents to "
          "etcd (members started with --client-cert-auth want one)");
ABSL_FLAG(std::string, etcd_key_file, "",
          "with --etcd_cert_file: PEM file of that certificate's private key");
ABSL_FLAG(std::string, etcd_endpoints, "",
          "client addresses of the etcd members, host:port,host:port,... (--kv_backend=etcd)");
ABSL_FLAG(std::string, etcd_prefix, "/ckptfs/",
          "prefix of this cluster's keys in etcd (one etcd cluster can hold several)");
ABSL_FLAG(int64_t, etcd_lock_ttl_s, 10,
          "with etcd, one metadata server serves a prefix at a time (with --etcd_shared: "
          "runs the orphan reclaimer); another waits and takes over within this many "
          "seconds of the first one's death");
ABSL_FLAG(bool, etcd_shared, false,
          "with etcd, serve at once beside the other metadata servers of the prefix (all "
          "started with --etcd_shared) instead of waiting as a standby; one of them at a "
          "time runs the orphan reclaimer");
ABSL_FLAG(int64_t, shared_poll_ms, 150,
          "with --etcd_shared, how often (milliseconds) the commit barriers look in etcd for "
          "the ranks that arrived through the other metadata servers");
ABSL_FLAG(int64_t, orphan_grace_s, 3600,
          "seconds an unlinked file's chunks are kept for handles still open on it");
ABSL_FLAG(int64_t, server_timeout_s, 10,
          "a storage server without a heartbeat for this long is considered down");
ABSL_FLAG(uint32_t, default_chunk_size, 4u << 20,
          "chunk size of files in directories without user.ckptfs.chunk_size "
          "(power of two, 64 KiB .. 64 MiB)");
ABSL_FLAG(std::string, ec, "",
          "erasure-code the chunks of files in directories without user.ckptfs.ec: K+M (K data "
          "and M parity fragments, each on its own storage server, e.g. 4+2); empty or none: "
          "copies (--replicas)");
ABSL_FLAG(uint32_t, replicas, 2,
          "copies of every chunk of files in directories without user.ckptfs.replicas, "
          "each on a different storage server (1 .. 8; 2 survives the loss of one server, 1 "
          "loses the files with chunks on a server whose disk is lost)");
ABSL_FLAG(int64_t, reclaim_interval_s, 5, "seconds between orphan reclaimer passes");
ABSL_FLAG(bool, sync_commits, false,
          "fsync the metadata WAL on every commit (survives power loss, not only kill -9)");
ABSL_FLAG(int64_t, commit_timeout_s, 600,
          "seconds a checkpoint's commit barrier waits, from its first rank's commit, for "
          "the other ranks before it aborts (ETIMEDOUT), unless the declaration or "
          "user.ckptfs.commit_timeout_s of the checkpoint or its parent says otherwise");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(std::string, credential_file, "",
          "file (mode 0600) holding the cluster's client credential, which every RPC must "
          "carry (or the server credential); empty: serve anyone (authentication off)");
ABSL_FLAG(std::string, server_credential_file, "",
          "file (mode 0600) holding the cluster's server credential, which registering "
          "storage servers, their heartbeats and the repairer's moves and reports must carry, "
          "and which this service presents to storage servers; empty: the client credential "
          "serves for those too");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port to serve Prometheus metrics on (GET /metrics); empty: no metrics server");

namespace ckptfs::meta {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitInUse = 2;

bool ParseLogLevel(std::string level) {
  level = absl::AsciiStrToLower(level);
  if (level == "debug")
    SetMinLogSeverity(LogSeverity::kDebug);
  else if (level == "info")
    SetMinLogSeverity(LogSeverity::kInfo);
  else if (level == "warning")
    SetMinLogSeverity(LogSeverity::kWarning);
  else if (level == "error")
    SetMinLogSeverity(LogSeverity::kError);
  else
    return false;
  return true;
}

int Main() {
  SetLogComponent("ckptfs-meta");
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level))) {
    CKPTFS_LOG(kError) << "--log_level must be debug, info, warning or error";
    return kExitFailure;
  }
  MetaServer::Options options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  absl::StatusOr<std::string> credential = LoadCredentialFlag(absl::GetFlag(FLAGS_credential_file));
  if (!credential.ok()) {
    CKPTFS_LOG(kError) << "--credential_file: " << credential.status().message();
    return kExitFailure;
  }
  if (credential->empty()) {
    CKPTFS_LOG(kWarning) << "authentication is off: any client that reaches this service "
                            "can read and change the namespace (give --credential_file to "
                            "require the cluster's credential)";
  }
  options.credential = *credential;
  absl::StatusOr<std::string> server_credential =
      LoadCredentialFlag(absl::GetFlag(FLAGS_server_credential_file));
  if (!server_credential.ok()) {
    CKPTFS_LOG(kError) << "--server_credential_file: " << server_credential.status().message();
    return kExitFailure;
  }
  if (!credential->empty() && server_credential->empty()) {
    CKPTFS_LOG(kWarning) << "no --server_credential_file: whoever holds the client credential "
                            "(every mount) can also register storage servers and move stripes";
  }
  if (credential->empty() && !server_credential->empty()) {
    CKPTFS_LOG(kError) << "--server_credential_file needs --credential_file too (a server "
                          "credential alone would leave the namespace open to anyone)";
    return kExitFailure;
  }
  options.server_credential = *server_credential;
  const std::string backend = absl::GetFlag(FLAGS_kv_backend);
  if (backend != "rocksdb" && backend != "etcd") {
    CKPTFS_LOG(kError) << "--kv_backend must be rocksdb or etcd, not \"" << backend << "\"";
    return kExitFailure;
  }
  const bool on_etcd = backend == "etcd";
  absl::StatusOr<std::vector<std::string>> etcd_endpoints;
  EtcdClient::Options etcd_options;  // the endpoints and TLS of every etcd client here
  if (on_etcd) {
    etcd_endpoints = EtcdClient::ParseEndpoints(absl::GetFlag(FLAGS_etcd_endpoints));
    if (!etcd_endpoints.ok()) {
      CKPTFS_LOG(kError) << "--etcd_endpoints: " << etcd_endpoints.status().message();
      return kExitFailure;
    }
    etcd_options.endpoints = *etcd_endpoints;
    absl::StatusOr<std::optional<EtcdClient::Tls>> tls =
        EtcdClient::LoadTls(absl::GetFlag(FLAGS_etcd_ca_file), absl::GetFlag(FLAGS_etcd_cert_file),
                            absl::GetFlag(FLAGS_etcd_key_file));
    if (!tls.ok()) {
      CKPTFS_LOG(kError) << tls.status().message();
      return kExitFailure;
    }
    etcd_options.tls = *std::move(tls);
    if (absl::GetFlag(FLAGS_etcd_lock_ttl_s) < 2) {
      CKPTFS_LOG(kError) << "--etcd_lock_ttl_s must be at least 2";
      return kExitFailure;
    }
    if (absl::GetFlag(FLAGS_shared_poll_ms) < 1 || absl::GetFlag(FLAGS_shared_poll_ms) > 60000) {
      CKPTFS_LOG(kError) << "--shared_poll_ms must be between 1 and 60000";
      return kExitFailure;
    }
  } else if (options.data_dir.empty()) {
    CKPTFS_LOG(kError) << "--data_dir is required (or --kv_backend=etcd)";
    return kExitFailure;
  }
  if (absl::Status valid = ValidateChunkSize(absl::GetFlag(FLAGS_default_chunk_size));
      !valid.ok()) {
    CKPTFS_LOG(kError) << "--default_chunk_size: " << valid.message();
    return kExitFailure;
  }
  options.default_chunk_size = absl::GetFlag(FLAGS_default_chunk_size);
  if (absl::Status valid = ValidateReplicas(absl::GetFlag(FLAGS_replicas)); !valid.ok()) {
    CKPTFS_LOG(kError) << "--replicas: " << valid.message();
    return kExitFailure;
  }
  options.default_replicas = absl::GetFlag(FLAGS_replicas);
  if (const std::string ec = absl::GetFlag(FLAGS_ec); !ec.empty()) {
    absl::StatusOr<ErasureCodeSpec> parsed = ParseErasureCode(ec);
    if (!parsed.ok()) {
      CKPTFS_LOG(kError) << "--ec: " << parsed.status().message();
      return kExitFailure;
    }
    options.default_ec = *parsed;
  }
  const int64_t grace_s = absl::GetFlag(FLAGS_orphan_grace_s);
  const int64_t timeout_s = absl::GetFlag(FLAGS_server_timeout_s);
  const int64_t reclaim_s = absl::GetFlag(FLAGS_reclaim_interval_s);
  if (grace_s < 0 || timeout_s <= 0 || reclaim_s <= 0) {
    CKPTFS_LOG(kError) << "--orphan_grace_s must be >= 0; --server_timeout_s and "
                          "--reclaim_interval_s must be > 0";
    return kExitFailure;
  }
  options.orphan_grace = absl::Seconds(grace_s);
  options.server_timeout = absl::Seconds(timeout_s);
  options.reclaim_interval = absl::Seconds(reclaim_s);
  options.sync_commits = absl::GetFlag(FLAGS_sync_commits);
  const int64_t commit_timeout_s = absl::GetFlag(FLAGS_commit_timeout_s);
  if (commit_timeout_s <= 0 || commit_timeout_s > UINT32_MAX) {
    CKPTFS_LOG(kError) << "--commit_timeout_s must be between 1 and " << UINT32_MAX;
    return kExitFailure;
  }
  options.commit_timeout_s = static_cast<uint32_t>(commit_timeout_s);

  std::error_code error;
  if (!on_etcd) std::filesystem::create_directories(options.data_dir, error);
  if (error) {
    CKPTFS_LOG(kError) << "cannot create --data_dir " << options.data_dir << ": "
                       << error.message();
    return kExitFailure;
  }

  // Block the stop signals before any thread starts so that every thread
  // inherits the mask and only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Bound before the service so that a busy metrics port fails start-up
  // before anything else is opened.
  std::unique_ptr<metrics::MetricsHttpServer> metrics_server;
  if (const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
      !metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsHttpServer>> started =
        metrics::StartMetricsServer(metrics_listen, &metrics::Registry::Default());
    if (!started.ok()) {
      CKPTFS_LOG(kError) << started.status().message();
      return ErrnoFromStatus(started.status()) == EADDRINUSE ? kExitInUse : kExitFailure;
    }
    metrics_server = *std::move(started);
  }

  // On etcd: take the prefix's server lock (waiting as a standby while
  // another server holds it), then open the store on the same client.
  std::unique_ptr<KvStore> store;
  std::unique_ptr<EtcdServerLock> etcd_lock;
  std::shared_ptr<EtcdClient> duty_lock_client;
  std::unique_ptr<SharedPresence> shared_presence;
  EtcdServerLock::Options duty_lock_options;
  const bool etcd_shared = on_etcd && absl::GetFlag(FLAGS_etcd_shared);
  if (etcd_shared) {
    // Serve at once; the lock only guards the duties (taken after Start).
    EtcdClient::Options lock_client_options = etcd_options;
    lock_client_options.call_timeout = absl::Seconds(3);
    lock_client_options.attempt_timeout = absl::Seconds(1);
    duty_lock_client = std::make_shared<EtcdClient>(lock_client_options);
    duty_lock_options.key_prefix = absl::GetFlag(FLAGS_etcd_prefix);
    duty_lock_options.holder = SharedHolderName(options.listen, getpid());
    duty_lock_options.ttl = absl::Seconds(absl::GetFlag(FLAGS_etcd_lock_ttl_s));
    // Refuse to serve beside a server that serves the prefix alone
    // (etcd_serving_mode.h).
    absl::StatusOr<std::unique_ptr<SharedPresence>> presence = SharedPresence::Register(
        duty_lock_client, duty_lock_options.key_prefix, duty_lock_options.holder,
        duty_lock_options.ttl, absl::Seconds(30), [](const absl::Status&) {
          CKPTFS_LOG(kError) << "exiting: a metadata server serves the "
                                "prefix alone beside this one";
          _exit(kExitFailure);
        });
    if (!presence.ok()) {
      CKPTFS_LOG(kError) << presence.status().message();
      return kExitFailure;
    }
    shared_presence = *std::move(presence);
    auto client = std::make_shared<EtcdClient>(etcd_options);
    absl::StatusOr<std::unique_ptr<EtcdKvStore>> etcd =
        EtcdKvStore::Open(client, EtcdKvStore::Options{duty_lock_options.key_prefix});
    if (!etcd.ok()) {
      CKPTFS_LOG(kError) << etcd.status().message();
      return kExitFailure;
    }
    EtcdKvStore* counter = etcd->get();  // lives as long as the server's store
    options.count_keys = [counter](absl::string_view prefix) {
      return counter->CountPrefix(prefix);
    };
    options.shared_poll = absl::Milliseconds(absl::GetFlag(FLAGS_shared_poll_ms));
    options.duties = false;
    store = *std::move(etcd);
  } else if (on_etcd) {
    // The lock's calls give up within seconds, so that a standby waiting
    // while etcd is unreachable still notices a stop signal promptly; the
    // store's calls ride out an etcd leader election (30 s).
    EtcdClient::Options lock_client_options = etcd_options;
    lock_client_options.call_timeout = absl::Seconds(3);
    lock_client_options.attempt_timeout = absl::Seconds(1);
    auto lock_client = std::make_shared<EtcdClient>(lock_client_options);
    auto client = std::make_shared<EtcdClient>(etcd_options);
    EtcdServerLock::Options lock_options;
    lock_options.key_prefix = absl::GetFlag(FLAGS_etcd_prefix);
    lock_options.holder = absl::StrCat(options.listen, " (pid ", getpid(), ")");
    lock_options.ttl = absl::Seconds(absl::GetFlag(FLAGS_etcd_lock_ttl_s));
    lock_options.cancelled = [&stop_signals] {
      const timespec now{0, 0};
      return sigtimedwait(&stop_signals, nullptr, &now) > 0;
    };
    const auto lost = [] {
      CKPTFS_LOG(kError) << "exiting: another metadata server may take over the namespace";
      _exit(kExitFailure);
    };
    // Refuse to serve alone beside servers that share the prefix
    // (etcd_serving_mode.h): before waiting as a standby, and again once the
    // lock is ours (a shared server may have started meanwhile). An etcd
    // error before the wait is left to Acquire, which waits for etcd.
    if (absl::Status shared = CheckNoSharedServers(*lock_client, lock_options.key_prefix);
        absl::IsFailedPrecondition(shared)) {
      CKPTFS_LOG(kError) << shared.message();
      return kExitFailure;
    }
    absl::StatusOr<std::unique_ptr<EtcdServerLock>> lock =
        EtcdServerLock::Acquire(lock_client, lock_options, lost);
    if (!lock.ok()) {
      if (absl::IsCancelled(lock.status())) return 0;  // stopped while a standby
      CKPTFS_LOG(kError) << lock.status().message();
      return kExitFailure;
    }
    etcd_lock = *std::move(lock);
    // An etcd error here (a failover often comes with etcd trouble) is
    // retried for a while rather than giving up the lock just won.
    absl::Status shared = CheckNoSharedServers(*lock_client, lock_options.key_prefix);
    for (int attempt = 1; !shared.ok() && !absl::IsFailedPrecondition(shared) && attempt < 10;
         ++attempt) {
      CKPTFS_LOG(kWarning) << "cannot check for shared servers on the prefix (attempt " << attempt
                           << "): " << shared.message();
      absl::SleepFor(absl::Seconds(1));
      shared = CheckNoSharedServers(*lock_client, lock_options.key_prefix);
    }
    if (!shared.ok()) {
      CKPTFS_LOG(kError) << shared.message();
      return kExitFailure;  // etcd_lock's destructor frees the lock
    }
    absl::StatusOr<std::unique_ptr<EtcdKvStore>> etcd =
        EtcdKvStore::Open(client, EtcdKvStore::Options{lock_options.key_prefix});
    if (!etcd.ok()) {
      CKPTFS_LOG(kError) << etcd.status().message();
      return kExitFailure;
    }
    // Every write also checks that the lock is still ours (fencing).
    (*etcd)->SetFence(EtcdServerLock::LockKey(lock_options.key_prefix), etcd_lock->lease(), lost);
    store = *std::move(etcd);
  }

  absl::StatusOr<std::unique_ptr<MetaServer>> server = MetaServer::Start(options, std::move(store));
  if (!server.ok()) {
    CKPTFS_LOG(kError) << server.status().message();
    const int err = ErrnoFromStatus(server.status());
    return err == EADDRINUSE || err == EBUSY ? kExitInUse : kExitFailure;
  }
  CKPTFS_LOG(kInfo) << "metadata in "
                    << (on_etcd ? absl::StrCat("etcd ", absl::GetFlag(FLAGS_etcd_endpoints),
                                               " under ", absl::GetFlag(FLAGS_etcd_prefix))
                                : options.data_dir)
                    << "; default chunk size " << options.default_chunk_size << " B, "
                    << (options.default_ec.enabled()
                            ? absl::StrCat("erasure coding ", options.default_ec.k, "+",
                                           options.default_ec.m)
                            : absl::StrCat(options.default_replicas,
                                           options.default_replicas == 1 ? " copy" : " replicas"))
                    << " of each chunk, orphan grace " << absl::FormatDuration(options.orphan_grace)
                    << ", server timeout " << absl::FormatDuration(options.server_timeout)
                    << ", checkpoint commit timeout " << options.commit_timeout_s << " s"
                    << (options.sync_commits ? ", fsync per commit" : "");
  if (metrics_server != nullptr) {
    CKPTFS_LOG(kInfo) << "metrics on http://" << metrics_server->address() << "/metrics";
  }
  std::unique_ptr<EtcdDutyLock> duty_lock;
  if (etcd_shared) {
    MetaServer* serving = server->get();
    duty_lock = std::make_unique<EtcdDutyLock>(
        duty_lock_client, duty_lock_options, [serving] { serving->StartDuties(); },
        [serving] { serving->StopDuties(); });
  }
  CKPTFS_LOG(kInfo) << "serving on " << (*server)->address()
                    << (etcd_shared ? " (shared: beside the other metadata servers of the "
                                      "etcd prefix)"
                                    : "");

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  CKPTFS_LOG(kInfo) << "received " << strsignal(signal_number) << ", shutting down";
  duty_lock.reset();  // stops the duties and frees them for another server
  (*server)->Shutdown();
  server->reset();
  etcd_lock.reset();  // frees the prefix for a standby at once
  shared_presence.reset();
  CKPTFS_LOG(kInfo) << "stopped";
  return 0;
}

}  // namespace
}  // namespace ckptfs::meta

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection on, which costs
  // a few percent of every lock (gRPC's included) in cycle bookkeeping.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::ParseCommandLine(argc, argv);
  return ckptfs::meta::Main();
}
