// ckptfs-fuse: mounts a ckptfs cluster with FUSE.
//
//   ckptfs-fuse --meta=127.0.0.1:7000 --mountpoint=/checkpoints [--foreground]
//               [--threads=16] [--max_threads=512] [--attr_timeout_s=0]
//               [--entry_timeout_s=0] [--dir_timeout_s=0] [--direct_io_writes]
//               [--direct_io_reads=false] [--writeback_cache]
//               [--splice] [--auto_inval_data] [--max_background=64]
//               [--write_buffer_mb=2048] [--idle_buffer_mb=4096] [--read_cache_mb=4096]
//               [--readahead_chunks=8]
//               [--max_inflight_chunks=16] [--local_reads=true] [--local_writes=true]
//               [--fuse_options=allow_other,...] [--log_level=info]
//               [--metrics_listen=HOST:PORT] [--credential_file=PATH]
//
// Order of start-up: connect the Client (exit 1 with a clear message if the
// metadata service is unreachable), then mount (exit 1 if the mountpoint is
// missing or already mounted), then serve. Without --foreground the process
// forks first, before any thread exists (the Client's threads would not
// survive a fork), and the parent exits 0 only once the child reports the
// mount live: when `ckptfs-fuse` returns 0, the mountpoint works. The
// daemon keeps logging to stderr when that is a regular file (a log file of
// `ckptfs up`); otherwise its stdio goes to /dev/null, so a caller reading
// its output to EOF is not kept waiting.
//
// SIGTERM, SIGINT, SIGHUP: unmount and exit 0. `fusermount3 -u DIR`: exit 0.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "common/credential.h"
#include "common/log.h"
#include "common/metrics/http_server.h"
#include "common/tcp.h"
#include "common/unique_fd.h"
#include "fuse/filesystem.h"
#include "fuse/mount.h"

ABSL_FLAG(std::string, meta, "127.0.0.1:7000",
          "address (host:port) of the metadata service, or every metadata server as "
          "A,B,... (numeric addresses; the mount uses whichever serves)");
ABSL_FLAG(std::string, mountpoint, "", "directory to mount ckptfs on (must exist)");
ABSL_FLAG(bool, foreground, false,
          "stay in the foreground; otherwise daemonize once the mount is live");
ABSL_FLAG(int32_t, threads, 16, "FUSE worker threads kept alive when idle");
ABSL_FLAG(int32_t, max_threads, 512,
          "most FUSE worker threads (requests served at once); each rank waiting in a "
          "checkpoint commit holds one");
ABSL_FLAG(double, attr_timeout_s, 0,
          "seconds the kernel may cache attributes; 0 keeps close-to-open across mounts");
ABSL_FLAG(double, entry_timeout_s, 0,
          "seconds the kernel may cache name lookups; 0 shows other mounts' renames at once");
ABSL_FLAG(double, dir_timeout_s, 0,
          "seconds the kernel may cache a directory's name and attributes (a directory "
          "gets the larger of this and --attr_timeout_s or --entry_timeout_s); saves a "
          "metadata request per path component per open(); another mount's rmdir, rename or "
          "chmod of a directory (and a checkpoint removed by retention) shows in stat() after "
          "up to this long");
ABSL_FLAG(std::string, credential_file, "",
          "file (mode 0600) holding the cluster's credential, presented to the metadata "
          "service and the storage servers; empty: none (a cluster that wants one refuses)");
ABSL_FLAG(std::string, fuse_options, "", "extra mount options, comma-separated (e.g. allow_other)");
ABSL_FLAG(std::string, log_level, "info", "minimum log severity: debug, info, warning, error");
ABSL_FLAG(bool, fuse_debug, false, "print libfuse's trace of every request on stderr");
ABSL_FLAG(bool, direct_io_writes, true, "write-only opens bypass the page cache (FUSE direct_io)");
ABSL_FLAG(bool, direct_io_reads, true,
          "the first read-only open of each version of a file bypasses the page cache too "
          "(FUSE direct_io; later opens share the page cache), where the kernel keeps such "
          "files mmap-able (Linux 6.6+; elsewhere they stay cached): own-shard loads take "
          "half the CPU, a first reader's unbuffered small reads (8 KiB) are much slower");
ABSL_FLAG(bool, writeback_cache, false,
          "let the kernel cache writes and send them in the background (no direct_io then)");
ABSL_FLAG(bool, auto_inval_data, false,
          "the kernel checks attributes before every read (a metadata call each) and drops "
          "cached pages another mount changed; off: a reopen still sees them (close-to-open)");
ABSL_FLAG(bool, splice, false, "move requests and replies through pipes (FUSE splice)");
ABSL_FLAG(int32_t, max_background, 64,
          "background requests (readahead, async direct I/O) the kernel may have in flight");
ABSL_FLAG(int32_t, write_buffer_mb, 2048,
          "write-behind memory of the mount in MiB: each file being written has one chunk "
          "buffer, further ones come from this; writers wait (never fail) when it is spent");
ABSL_FLAG(int32_t, read_cache_mb, 4096,
          "read-cache memory of the mount in MiB (chunks fetched and read ahead, all files "
          "together); when spent, files read no further ahead and reads are not cached");
ABSL_FLAG(int32_t, idle_buffer_mb, 4096,
          "chunk buffers kept, in MiB, when the files that used them close, for the files "
          "and storms that come next (filling fresh memory costs page faults); never more "
          "than a storm used at once");
ABSL_FLAG(int32_t, readahead_chunks, 8,
          "chunks fetched ahead of a sequential reader, per open file (0..64; each "
          "takes a chunk-sized buffer)");
ABSL_FLAG(bool, local_reads, true,
          "read the chunks of storage servers on this host from their chunk files instead "
          "of over TCP (checked like the server checks them; anything odd goes to the "
          "server): a third less CPU per GiB read and faster loads; no effect on a node "
          "without storage servers");
ABSL_FLAG(bool, local_writes, true,
          "write whole chunks for storage servers on this host as chunk files in their tmp/ "
          "directory, which they adopt, instead of sending them over TCP (anything that fails "
          "goes over TCP); no effect on a node without storage servers");
ABSL_FLAG(int32_t, max_inflight_chunks, 16, "chunk writes one open file may have in flight");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port to serve Prometheus metrics on (GET /metrics); empty: no metrics server");
ABSL_FLAG(int32_t, read_ahead_kb, 4096,
          "kernel readahead of the mount in KiB (needs root; 0 keeps the kernel default)");

namespace ckptfs::fuse {
namespace {

constexpr int kExitFailure = 1;

bool ParseLogLevel(const std::string& text, LogSeverity* severity) {
  if (text == "debug")
    *severity = LogSeverity::kDebug;
  else if (text == "info")
    *severity = LogSeverity::kInfo;
  else if (text == "warning")
    *severity = LogSeverity::kWarning;
  else if (text == "error")
    *severity = LogSeverity::kError;
  else
    return false;
  return true;
}

// Forks. The parent waits for the child's verdict on its start-up and exits
// with it (EOF, a child that died, reads as failure). The child returns the
// pipe to report on, in a new session.
UniqueFd ForkDaemon() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("ckptfs-fuse: pipe");
    std::exit(kExitFailure);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("ckptfs-fuse: fork");
    std::exit(kExitFailure);
  }
  if (pid > 0) {
    close(fds[1]);
    char code = kExitFailure;
    ssize_t n;
    do {
      n = read(fds[0], &code, 1);
    } while (n < 0 && errno == EINTR);
    _exit(n == 1 ? code : kExitFailure);
  }
  close(fds[0]);
  setsid();
  return UniqueFd(fds[1]);
}

void ReportStartup(UniqueFd& report, char code) {
  if (!report.valid()) return;
  ssize_t n;
  do {
    n = write(report.get(), &code, 1);
  } while (n < 0 && errno == EINTR);
  report.Reset();
}

// Detaches a daemon from the terminal and from its caller's pipes.
void DetachStdio() {
  if (chdir("/") != 0) {
    CKPTFS_LOG(kWarning) << "chdir / failed";
  }
  const int null_fd = open("/dev/null", O_RDWR);
  if (null_fd < 0) return;
  dup2(null_fd, STDIN_FILENO);
  dup2(null_fd, STDOUT_FILENO);
  struct stat st;
  if (fstat(STDERR_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) dup2(null_fd, STDERR_FILENO);
  if (null_fd > STDERR_FILENO) close(null_fd);
}

// Each worker thread reads from its own /dev/fuse descriptor (clone_fd), and
// up to --max_threads of them may run: with the Client's sockets that can
// pass the usual soft limit of 1024. Take the hard limit.
void RaiseOpenFileLimit() {
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur >= nofile.rlim_max) return;
  nofile.rlim_cur = nofile.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) {
    CKPTFS_LOG(kWarning) << "cannot raise the open-file limit: " << std::strerror(errno);
  }
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "mounts a ckptfs cluster: ckptfs-fuse --meta=HOST:PORT --mountpoint=DIR [--foreground]");
  // Debian's Abseil is built with Mutex deadlock detection on, which costs
  // a few percent of every lock (gRPC's included) in cycle bookkeeping.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  SetLogComponent("fuse");
  if (positional.size() > 1) {
    CKPTFS_LOG(kError) << "unexpected argument \"" << positional[1]
                       << "\"; options are --flag=value (see --help)";
    return kExitFailure;
  }
  LogSeverity severity;
  if (!ParseLogLevel(absl::GetFlag(FLAGS_log_level), &severity)) {
    CKPTFS_LOG(kError) << "--log_level must be debug, info, warning or error";
    return kExitFailure;
  }
  SetMinLogSeverity(severity);

  const std::string meta = absl::GetFlag(FLAGS_meta);
  std::string mountpoint = absl::GetFlag(FLAGS_mountpoint);
  if (absl::StatusOr<HostPort> addr = ParseHostPort(meta); !addr.ok()) {
    CKPTFS_LOG(kError) << "--meta: " << addr.status().message();
    return kExitFailure;
  }
  const double attr_timeout_s = absl::GetFlag(FLAGS_attr_timeout_s);
  const double entry_timeout_s = absl::GetFlag(FLAGS_entry_timeout_s);
  const double dir_timeout_s = absl::GetFlag(FLAGS_dir_timeout_s);
  const int threads = absl::GetFlag(FLAGS_threads);
  const int max_threads = absl::GetFlag(FLAGS_max_threads);
  const int max_background = absl::GetFlag(FLAGS_max_background);
  const int write_buffer_mb = absl::GetFlag(FLAGS_write_buffer_mb);
  const int idle_buffer_mb = absl::GetFlag(FLAGS_idle_buffer_mb);
  const int read_cache_mb = absl::GetFlag(FLAGS_read_cache_mb);
  const int readahead_chunks = absl::GetFlag(FLAGS_readahead_chunks);
  const int max_inflight_chunks = absl::GetFlag(FLAGS_max_inflight_chunks);
  if (attr_timeout_s < 0 || entry_timeout_s < 0 || dir_timeout_s < 0 || threads < 1 ||
      max_threads < 1 || max_background < 1 || max_background > 65535 || write_buffer_mb < 0 ||
      idle_buffer_mb < 0 || read_cache_mb < 0 || readahead_chunks < 0 || readahead_chunks > 64 ||
      max_inflight_chunks < 1) {
    CKPTFS_LOG(kError) << "--attr_timeout_s, --entry_timeout_s and --dir_timeout_s must be "
                          ">= 0, --threads, "
                          "--max_threads and --max_inflight_chunks >= 1, --max_background in "
                          "1..65535, --write_buffer_mb, --idle_buffer_mb and --read_cache_mb "
                          ">= 0, --readahead_chunks in 0..64";
    return kExitFailure;
  }
  // Checked again by Mount::Create; here it fails before any fork or RPC.
  absl::StatusOr<std::string> canonical = CheckMountpoint(mountpoint);
  if (!canonical.ok()) {
    CKPTFS_LOG(kError) << canonical.status().message();
    return kExitFailure;
  }
  mountpoint = *canonical;

  // Bound before the fork, so that a busy port fails in the caller's
  // process; served (a thread) only in the daemon, once mounted.
  UniqueFd metrics_listener;
  if (const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
      !metrics_listen.empty()) {
    absl::StatusOr<UniqueFd> listener = metrics::ListenForMetrics(metrics_listen);
    if (!listener.ok()) {
      CKPTFS_LOG(kError) << listener.status().message();
      return kExitFailure;
    }
    metrics_listener = *std::move(listener);
  }

  // Read before the fork too, so that a bad file fails in the caller's
  // process with the reason; the Client reads it again.
  const std::string credential_file = absl::GetFlag(FLAGS_credential_file);
  if (absl::StatusOr<std::string> credential = LoadCredentialFlag(credential_file);
      !credential.ok()) {
    CKPTFS_LOG(kError) << "--credential_file: " << credential.status().message();
    return kExitFailure;
  } else if (credential->empty()) {
    CKPTFS_LOG(kWarning) << "authentication is off: no --credential_file, so a cluster that "
                            "requires its credential will refuse this mount";
  }

  RaiseOpenFileLimit();
  UniqueFd report;
  if (!absl::GetFlag(FLAGS_foreground)) report = ForkDaemon();
  BlockTerminationSignals();  // before the Client starts its threads

  client::ClientOptions client_options;
  client_options.meta_address = meta;
  client_options.credential_file = credential_file;
  client_options.write_buffer_budget_bytes = int64_t{write_buffer_mb} << 20;
  client_options.idle_buffer_bytes = int64_t{idle_buffer_mb} << 20;
  client_options.read_cache_budget_bytes = int64_t{read_cache_mb} << 20;
  client_options.readahead_chunks = readahead_chunks;
  // Direct reads share no page cache: ranks reading one shard share the
  // file's read cache instead. Where the kernel turns direct reads down
  // (Filesystem::Init) the wider window only spends read-cache budget that
  // the page cache makes unneeded: at most a quarter of it per file.
  client_options.read_window_per_handle =
      absl::GetFlag(FLAGS_direct_io_reads) && !absl::GetFlag(FLAGS_writeback_cache);
  client_options.local_reads = absl::GetFlag(FLAGS_local_reads);
  client_options.local_writes = absl::GetFlag(FLAGS_local_writes);
  client_options.max_inflight_chunks_per_file = max_inflight_chunks;
  absl::StatusOr<std::unique_ptr<client::Client>> client = client::Client::Connect(client_options);
  if (!client.ok()) {
    // The Client's message names the address and what failed.
    CKPTFS_LOG(kError) << client.status().message();
    ReportStartup(report, kExitFailure);
    return kExitFailure;
  }

  FilesystemOptions fs_options;
  fs_options.attr_timeout = absl::Seconds(attr_timeout_s);
  fs_options.entry_timeout = absl::Seconds(entry_timeout_s);
  fs_options.dir_timeout = absl::Seconds(dir_timeout_s);
  fs_options.direct_io_writes = absl::GetFlag(FLAGS_direct_io_writes);
  fs_options.direct_io_reads = absl::GetFlag(FLAGS_direct_io_reads);
  fs_options.writeback_cache = absl::GetFlag(FLAGS_writeback_cache);
  fs_options.splice = absl::GetFlag(FLAGS_splice);
  fs_options.auto_inval_data = absl::GetFlag(FLAGS_auto_inval_data);
  fs_options.max_background = static_cast<unsigned>(max_background);
  MountOptions mount_options;
  mount_options.mountpoint = mountpoint;
  mount_options.threads = threads;
  mount_options.max_threads = max_threads;
  mount_options.extra_options = absl::GetFlag(FLAGS_fuse_options);
  mount_options.fuse_debug = absl::GetFlag(FLAGS_fuse_debug);
  mount_options.read_ahead_kb = absl::GetFlag(FLAGS_read_ahead_kb);
  absl::StatusOr<std::unique_ptr<Mount>> mount =
      Mount::Create(std::make_unique<Filesystem>(std::move(*client), fs_options), mount_options);
  if (!mount.ok()) {
    CKPTFS_LOG(kError) << mount.status().message();
    ReportStartup(report, kExitFailure);
    return kExitFailure;
  }
  CKPTFS_LOG(kInfo) << "ckptfs-fuse: mounted ckptfs of " << meta << " at " << mountpoint << " ("
                    << threads << " idle threads, at most " << MaxWorkerThreads(mount_options)
                    << ", attr_timeout " << attr_timeout_s << "s, entry_timeout " << entry_timeout_s
                    << "s, dir_timeout " << dir_timeout_s << "s)";
  std::unique_ptr<metrics::MetricsHttpServer> metrics_server;
  if (metrics_listener.valid()) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsHttpServer>> started =
        metrics::MetricsHttpServer::Start(std::move(metrics_listener),
                                          &metrics::Registry::Default());
    if (!started.ok()) {
      CKPTFS_LOG(kError) << started.status().message();
      ReportStartup(report, kExitFailure);
      return kExitFailure;
    }
    metrics_server = *std::move(started);
    CKPTFS_LOG(kInfo) << "metrics on http://" << metrics_server->address() << "/metrics";
  }
  if (report.valid()) {
    DetachStdio();
    ReportStartup(report, 0);
  }

  absl::Status served = (*mount)->Run();
  mount->reset();  // unmounts if still mounted, closes leftover files
  if (!served.ok()) {
    CKPTFS_LOG(kError) << "serving " << mountpoint << ": " << served;
    return kExitFailure;
  }
  CKPTFS_LOG(kInfo) << "ckptfs-fuse: unmounted " << mountpoint;
  return 0;
}

}  // namespace
}  // namespace ckptfs::fuse

int main(int argc, char** argv) { return ckptfs::fuse::Main(argc, argv); }
