// ckptfs-meta: the metadata service daemon.
//
//   ckptfs-meta --listen=127.0.0.1:7000 --data_dir=DIR [--orphan_grace_s=3600]
//               [--server_timeout_s=10] [--default_chunk_size=4194304]
//               [--reclaim_interval_s=5] [--commit_timeout_s=600]
//               [--sync_commits] [--log_level=info]
//               [--metrics_listen=HOST:PORT]
//
// Logs "ckptfs-meta: serving on ADDR" once it accepts calls. Exit status: 0
// after SIGTERM/SIGINT (clean shutdown); 2 when the port or the data dir is
// already in use; 1 for any other startup failure (bad flags included).
#include <signal.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/metrics/http_server.h"
#include "server/meta/meta_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7000", "host:port to serve the metadata gRPC API on");
ABSL_FLAG(std::string, data_dir, "", "directory of the metadata store (created if missing)");
ABSL_FLAG(int64_t, orphan_grace_s, 3600,
          "seconds an unlinked file's chunks are kept for handles still open on it");
ABSL_FLAG(int64_t, server_timeout_s, 10,
          "a storage server without a heartbeat for this long is considered down");
ABSL_FLAG(uint32_t, default_chunk_size, 4u << 20,
          "chunk size of files in directories without user.ckptfs.chunk_size "
          "(power of two, 64 KiB .. 64 MiB)");
ABSL_FLAG(int64_t, reclaim_interval_s, 5, "seconds between orphan reclaimer passes");
ABSL_FLAG(bool, sync_commits, false,
          "fsync the metadata WAL on every commit (survives power loss, not only kill -9)");
ABSL_FLAG(int64_t, commit_timeout_s, 600,
          "seconds a checkpoint's commit barrier waits, from its first rank's commit, for "
          "the other ranks before it aborts (ETIMEDOUT), unless the declaration or "
          "user.ckptfs.commit_timeout_s of the checkpoint or its parent says otherwise");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port to serve Prometheus metrics on (GET /metrics); empty: no metrics server");

namespace ckptfs::meta {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitInUse = 2;

bool ParseLogLevel(std::string level) {
  level = absl::AsciiStrToLower(level);
  if (level == "debug") SetMinLogSeverity(LogSeverity::kDebug);
  else if (level == "info") SetMinLogSeverity(LogSeverity::kInfo);
  else if (level == "warning") SetMinLogSeverity(LogSeverity::kWarning);
  else if (level == "error") SetMinLogSeverity(LogSeverity::kError);
  else return false;
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
  if (options.data_dir.empty()) {
    CKPTFS_LOG(kError) << "--data_dir is required";
    return kExitFailure;
  }
  if (absl::Status valid = ValidateChunkSize(absl::GetFlag(FLAGS_default_chunk_size));
      !valid.ok()) {
    CKPTFS_LOG(kError) << "--default_chunk_size: " << valid.message();
    return kExitFailure;
  }
  options.default_chunk_size = absl::GetFlag(FLAGS_default_chunk_size);
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
  std::filesystem::create_directories(options.data_dir, error);
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

  absl::StatusOr<std::unique_ptr<MetaServer>> server = MetaServer::Start(options);
  if (!server.ok()) {
    CKPTFS_LOG(kError) << server.status().message();
    const int err = ErrnoFromStatus(server.status());
    return err == EADDRINUSE || err == EBUSY ? kExitInUse : kExitFailure;
  }
  CKPTFS_LOG(kInfo) << "metadata in " << options.data_dir << "; default chunk size "
                    << options.default_chunk_size << " B, orphan grace "
                    << absl::FormatDuration(options.orphan_grace) << ", server timeout "
                    << absl::FormatDuration(options.server_timeout)
                    << ", checkpoint commit timeout " << options.commit_timeout_s << " s"
                    << (options.sync_commits ? ", fsync per commit" : "");
  if (metrics_server != nullptr) {
    CKPTFS_LOG(kInfo) << "metrics on http://" << metrics_server->address() << "/metrics";
  }
  CKPTFS_LOG(kInfo) << "serving on " << (*server)->address();

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  CKPTFS_LOG(kInfo) << "received " << strsignal(signal_number) << ", shutting down";
  (*server)->Shutdown();
  server->reset();
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
