// ckptfs-storage: one storage server. Claims its data directory, opens the
// chunk store, serves the framed data protocol, and registers with the
// metadata service (if --meta is given) and heartbeats. With
// --metrics_listen=HOST:PORT it serves Prometheus metrics at /metrics.
//
// Exit status: 0 after SIGTERM/SIGINT, 2 for a configuration problem the
// operator must fix (busy port, data directory in use, bad flag), 1 for
// other start-up failures.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/metrics/http_server.h"
#include "common/tcp.h"
#include "server/storage/chunk_store.h"
#include "server/storage/data_dir.h"
#include "server/storage/registration.h"
#include "server/storage/request_handler.h"
#include "server/storage/scrubber.h"
#include "server/storage/server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7001", "host:port to serve the data protocol on");
ABSL_FLAG(std::string, advertise, "",
          "host:port clients should dial (default: --listen); set it when listening on "
          "0.0.0.0");
ABSL_FLAG(std::string, data_dir, "",
          "directory holding this server's chunks (created if "
          "missing)");
ABSL_FLAG(std::string, meta, "",
          "host:port of the metadata service, or every metadata server as A,B,... (numeric "
          "addresses; registers with whichever serves); empty: do not register");
ABSL_FLAG(int, heartbeat_interval_s, 2, "seconds between heartbeats to the metadata service");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(int, buffer_pool_mb, 256,
          "payload memory allocated at start-up and shared by all requests in flight (at "
          "least 65 MiB: one 64 MiB chunk); requests that do not fit wait. 256: 64 writers "
          "with a 4 MiB chunk in flight each");
ABSL_FLAG(int, memory_budget_mb, 0, "deprecated name of --buffer_pool_mb (used when set)");
ABSL_FLAG(int, net_threads, 2, "network event-loop threads, each with its own io_uring");
ABSL_FLAG(int, disk_threads, 8, "disk worker threads, each with its own io_uring");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port to serve Prometheus metrics on (GET /metrics); empty: no metrics server");
ABSL_FLAG(std::string, credential_file, "",
          "file (mode 0600) holding the cluster's client credential, which every data "
          "connection must present (or the server credential); empty: serve anyone "
          "(authentication off)");
ABSL_FLAG(std::string, server_credential_file, "",
          "file (mode 0600) holding the cluster's server credential, which this server "
          "presents to the metadata service to register and heartbeat; empty: the client "
          "credential");
ABSL_FLAG(bool, zero_copy_send, false,
          "send READ replies with IORING_OP_SENDMSG_ZC (measured slower on loopback)");

ABSL_FLAG(int, scrub_mb_per_s, 16,
          "MiB per second the scrubber rereads to check stored chunks against their CRC32C "
          "(a chunk that fails is set aside so that a repair rewrites it); 0 turns it off");
ABSL_FLAG(int, scrub_interval_s, 3600, "seconds the scrubber rests between passes over the store");
ABSL_FLAG(int, scrub_first_delay_s, 30, "seconds after start before the scrubber's first pass");

namespace ckptfs::storage {
namespace {

constexpr int kExitConfig = 2;
constexpr int kExitFailure = 1;

int Fail(int code, absl::string_view message) {
  CKPTFS_LOG(kError) << message;
  return code;
}

int Main() {
  const std::string level = absl::AsciiStrToLower(absl::GetFlag(FLAGS_log_level));
  if (level == "debug") {
    SetMinLogSeverity(LogSeverity::kDebug);
  } else if (level == "warning") {
    SetMinLogSeverity(LogSeverity::kWarning);
  } else if (level == "error") {
    SetMinLogSeverity(LogSeverity::kError);
  } else if (level != "info") {
    return Fail(kExitConfig, absl::StrCat("--log_level=", level,
                                          ": want debug, info, "
                                          "warning or error"));
  }
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  if (data_dir.empty()) return Fail(kExitConfig, "--data_dir is required");
  auto listen = ParseHostPort(absl::GetFlag(FLAGS_listen));
  if (!listen.ok()) return Fail(kExitConfig, absl::StrCat("--listen: ", listen.status().message()));
  const std::string meta = absl::GetFlag(FLAGS_meta);
  if (!meta.empty()) {
    if (auto parsed = ParseHostPort(meta); !parsed.ok()) {
      return Fail(kExitConfig, absl::StrCat("--meta: ", parsed.status().message()));
    }
  }
  if (const std::string advertise = absl::GetFlag(FLAGS_advertise); !advertise.empty()) {
    if (auto parsed = ParseHostPort(advertise); !parsed.ok()) {
      return Fail(kExitConfig, absl::StrCat("--advertise: ", parsed.status().message()));
    }
  }
  absl::StatusOr<std::string> credential = LoadCredentialFlag(absl::GetFlag(FLAGS_credential_file));
  if (!credential.ok()) {
    return Fail(kExitConfig, absl::StrCat("--credential_file: ", credential.status().message()));
  }
  if (credential->empty()) {
    CKPTFS_LOG(kWarning) << "authentication is off: any client that reaches this server can "
                            "read and write its chunks (give --credential_file to require the "
                            "cluster's credential)";
  }
  absl::StatusOr<std::string> server_credential =
      LoadCredentialFlag(absl::GetFlag(FLAGS_server_credential_file));
  if (!server_credential.ok()) {
    return Fail(kExitConfig,
                absl::StrCat("--server_credential_file: ", server_credential.status().message()));
  }
  if (credential->empty() && !server_credential->empty()) {
    return Fail(kExitConfig,
                "--server_credential_file needs --credential_file too (a server "
                "credential alone would leave the chunks open to anyone)");
  }
  const int heartbeat_s = absl::GetFlag(FLAGS_heartbeat_interval_s);
  if (heartbeat_s <= 0) return Fail(kExitConfig, "--heartbeat_interval_s must be positive");
  int pool_mb = absl::GetFlag(FLAGS_buffer_pool_mb);
  if (const int budget_mb = absl::GetFlag(FLAGS_memory_budget_mb); budget_mb != 0) {
    CKPTFS_LOG(kWarning) << "--memory_budget_mb is deprecated; it now sets --buffer_pool_mb";
    pool_mb = budget_mb;
  }
  const int min_pool_mb = static_cast<int>((kMinBufferPoolBytes + (1 << 20) - 1) >> 20);
  if (pool_mb < min_pool_mb) {
    return Fail(kExitConfig, absl::StrCat("--buffer_pool_mb must be at least ", min_pool_mb,
                                          " (one 64 MiB chunk with its header must fit)"));
  }
  const int net_threads = absl::GetFlag(FLAGS_net_threads);
  if (net_threads <= 0 || net_threads > 64) {
    return Fail(kExitConfig, "--net_threads must be between 1 and 64");
  }
  const int disk_threads = absl::GetFlag(FLAGS_disk_threads);
  if (disk_threads <= 0 || disk_threads > 256) {
    return Fail(kExitConfig, "--disk_threads must be between 1 and 256");
  }

  const int scrub_mb_per_s = absl::GetFlag(FLAGS_scrub_mb_per_s);
  const int scrub_interval_s = absl::GetFlag(FLAGS_scrub_interval_s);
  const int scrub_first_delay_s = absl::GetFlag(FLAGS_scrub_first_delay_s);
  if (scrub_mb_per_s < 0 || scrub_interval_s < 0 || scrub_first_delay_s < 0) {
    return Fail(kExitConfig,
                "--scrub_mb_per_s, --scrub_interval_s and --scrub_first_delay_s must not be "
                "negative");
  }

  // SIGTERM/SIGINT are taken by sigwait below; block them before any thread
  // starts so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A peer or a log reader that goes away must not kill the server; sockets
  // already use MSG_NOSIGNAL, this covers stderr and everything else.
  ::signal(SIGPIPE, SIG_IGN);
  // Each connection holds a socket, and requests open chunk files (SYNC up
  // to 64 at once per disk thread): the usual soft limit of 1024 would fail
  // writes and fsyncs with EMFILE, or stall accept, at a few hundred
  // clients. Take the hard limit, as most servers do.
  if (rlimit nofile{};
      ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &nofile) != 0) {
      CKPTFS_LOG(kWarning) << "cannot raise the open-file limit: " << std::strerror(errno);
    }
  }

  // Bound first, so that a busy metrics port fails start-up like a busy
  // --listen does, before the data directory is claimed.
  std::unique_ptr<metrics::MetricsHttpServer> metrics_server;
  if (const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
      !metrics_listen.empty()) {
    auto started = metrics::StartMetricsServer(metrics_listen, &metrics::Registry::Default());
    if (!started.ok()) {
      const int err = ErrnoFromStatus(started.status());
      return Fail(err == EADDRINUSE || err == EINVAL ? kExitConfig : kExitFailure,
                  started.status().message());
    }
    metrics_server = *std::move(started);
    CKPTFS_LOG(kInfo) << "metrics on http://" << metrics_server->address() << "/metrics";
  }

  if (absl::Status s = CreateDirectories(data_dir); !s.ok()) {
    return Fail(kExitConfig, absl::StrCat("data directory: ", s.message()));
  }
  auto lock = DataDirLock::Acquire(data_dir);
  if (!lock.ok()) return Fail(kExitConfig, lock.status().message());
  auto uuid = LoadOrCreateServerUuid(data_dir);
  if (!uuid.ok()) return Fail(kExitFailure, uuid.status().message());
  auto identity_secret = LoadOrCreateServerSecret(data_dir);
  if (!identity_secret.ok()) return Fail(kExitFailure, identity_secret.status().message());
  auto store = ChunkStore::Open(data_dir);
  if (!store.ok()) return Fail(kExitFailure, store.status().message());
  Server::Options server_options;
  server_options.buffer_pool_bytes = size_t(pool_mb) << 20;
  server_options.net_threads = static_cast<size_t>(net_threads);
  server_options.disk_threads = static_cast<size_t>(disk_threads);
  server_options.zero_copy_send = absl::GetFlag(FLAGS_zero_copy_send);
  server_options.credential = *credential;
  server_options.server_credential = *server_credential;
  auto server = Server::Start(**store, *listen, server_options);
  if (!server.ok()) {
    const bool busy = ErrnoFromStatus(server.status()) == EADDRINUSE;
    return Fail(busy ? kExitConfig : kExitFailure,
                absl::StrCat("cannot listen: ", server.status().message()));
  }
  Scrubber::Options scrub_options;
  scrub_options.bytes_per_s = uint64_t(scrub_mb_per_s) << 20;
  scrub_options.pass_interval = absl::Seconds(scrub_interval_s);
  scrub_options.first_pass_delay = absl::Seconds(scrub_first_delay_s);
  auto scrubber = Scrubber::Start(scrub_options, **store);
  if (!scrubber.ok()) {
    return Fail(kExitFailure, absl::StrCat("scrubber: ", scrubber.status().message()));
  }
  if (scrub_mb_per_s == 0) {
    CKPTFS_LOG(kWarning) << "scrubbing is off (--scrub_mb_per_s=0): bit rot in chunks nobody "
                            "reads goes unnoticed";
  }
  std::string address = absl::GetFlag(FLAGS_advertise);
  if (address.empty()) {
    address = (*server)->address().ToString();
    if (listen->host == "0.0.0.0" || listen->host == "::") {
      CKPTFS_LOG(kWarning) << "listening on all interfaces but advertising " << address
                           << ", which other machines cannot dial; set --advertise";
    }
  }

  std::unique_ptr<Registration> registration;
  if (meta.empty()) {
    CKPTFS_LOG(kInfo) << "serving on " << address << " (no metadata service), data in " << data_dir;
  } else {
    CKPTFS_LOG(kInfo) << "listening on " << address << ", data in " << data_dir
                      << (store.value()->direct_io() ? " (O_DIRECT)" : " (buffered)")
                      << ", registering with " << meta;
    Registration::Options options;
    options.meta_address = meta;
    options.data_address = address;
    options.uuid = *uuid;
    options.identity_secret = *identity_secret;
    options.credential = server_credential->empty() ? *credential : *server_credential;
    options.heartbeat_interval = absl::Seconds(heartbeat_s);
    options.on_registered = [address](uint32_t id) {
      CKPTFS_LOG(kInfo) << "serving on " << address << " as server " << id;
    };
    // For `ckptfs status`: connections now, bytes moved since start (the
    // service turns two heartbeats into bytes/s).
    Server* serving = server->get();
    options.load = [serving] {
      return Registration::Options::Load{static_cast<uint32_t>(serving->active_connections()),
                                         RequestHandler::BytesReadTotal(),
                                         RequestHandler::BytesWrittenTotal()};
    };
    Scrubber* scrubbing = scrubber->get();
    options.scrub = [scrubbing] { return scrubbing->Report(); };
    // Chunk files that mounts on this host wrote and never had adopted.
    ChunkStore* chunks = store->get();
    options.after_heartbeat = [chunks] { chunks->SweepIfDue(); };
    registration = Registration::Start(std::move(options), **store);
  }

  int signal = 0;
  while (sigwait(&signals, &signal) != 0) {
  }
  CKPTFS_LOG(kInfo) << "signal " << signal << ": shutting down";
  if (registration) registration->Stop();
  (*scrubber)->Stop();
  (*server)->Stop();
  CKPTFS_LOG(kInfo) << "stopped";
  return 0;
}

}  // namespace
}  // namespace ckptfs::storage

int main(int argc, char** argv) {
  ckptfs::SetLogComponent("ckptfs-storage");
  // Debian's Abseil is built with Mutex deadlock detection on, which costs
  // a few percent of every lock (gRPC's included) in cycle bookkeeping.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::ParseCommandLine(argc, argv);
  return ckptfs::storage::Main();
}
