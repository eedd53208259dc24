// See mount.h.
#include "fuse/mount.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/unique_fd.h"

namespace ckptfs::fuse {
namespace {

// The fixed mount options of every ckptfs mount. default_permissions: the
// kernel checks permission bits against the attributes we return, as in any
// POSIX filesystem (access(2) included).
constexpr char kFixedOptions[] = "default_permissions,fsname=ckptfs,subtype=ckptfs";

// The session's I/O with the kernel: what libfuse would do itself, with
// every request and reply shown to the Filesystem's InitExtensions on the
// way (INIT flags libfuse 3.14 cannot ask for). The session's userdata is
// the Filesystem. errno is left as the system call set it: libfuse reads it.
ssize_t ReadRequest(int fd, void* buf, size_t len, void* userdata) {
  const ssize_t n = ::read(fd, buf, len);
  if (n > 0) {
    static_cast<Filesystem*>(userdata)->init_extensions().OnRequest(buf, static_cast<size_t>(n));
  }
  return n;
}

ssize_t WriteReply(int fd, struct iovec* iov, int count, void* userdata) {
  static_cast<Filesystem*>(userdata)->init_extensions().OnReply(iov, count);
  return ::writev(fd, iov, count);
}

// Splice as libfuse does it (with --splice); providing these keeps the
// splice capabilities, which libfuse offers under custom I/O only when set.
ssize_t SplicePipe(int fd_in, off_t* off_in, int fd_out, off_t* off_out, size_t len,
                   unsigned int flags, void* /*userdata*/) {
  static_assert(sizeof(off_t) == sizeof(loff_t));
  return ::splice(fd_in, reinterpret_cast<loff_t*>(off_in), fd_out,
                  reinterpret_cast<loff_t*>(off_out), len, flags);
}

constexpr fuse_custom_io kKernelIo = {
    .writev = WriteReply,
    .read = ReadRequest,
    .splice_receive = SplicePipe,
    .splice_send = SplicePipe,
};

// Whether a comma-separated option list holds `option` (alone or as
// option=value).
bool HasOption(absl::string_view list, absl::string_view option) {
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    if (entry == option || absl::StartsWith(entry, absl::StrCat(option, "="))) return true;
  }
  return false;
}

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGQUIT);
  return set;
}

// /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountPath(absl::string_view escaped) {
  std::string out;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '\\' && i + 3 < escaped.size()) {
      const char a = escaped[i + 1], b = escaped[i + 2], c = escaped[i + 3];
      if (a >= '0' && a <= '7' && b >= '0' && b <= '7' && c >= '0' && c <= '7') {
        out.push_back(static_cast<char>((a - '0') * 64 + (b - '0') * 8 + (c - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(escaped[i]);
  }
  return out;
}

// The filesystem type mounted at `path` (a canonical path), or "" if none.
std::string MountedFsType(const std::string& path) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    // id parent major:minor root mount_point options [optional...] - fstype source super
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 5 || UnescapeMountPath(fields[4]) != path) continue;
    for (size_t i = 5; i + 1 < fields.size(); ++i) {
      if (fields[i] == "-") return std::string(fields[i + 1]);
    }
    return "unknown";
  }
  return "";
}

// Sets read_ahead_kb of the bdi behind `mountpoint`. The stat blocks until
// the session has answered INIT (which would reset the value), so this runs
// on its own thread once the session loop serves requests.
void SetReadAhead(const std::string& mountpoint, int read_ahead_kb) {
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) return;  // unmounted meanwhile
  const std::string path =
      absl::StrCat("/sys/class/bdi/", major(st.st_dev), ":", minor(st.st_dev), "/read_ahead_kb");
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  const std::string value = absl::StrCat(read_ahead_kb);
  if (!fd.valid() || write(fd.get(), value.data(), value.size()) < 0) {
    const int err = errno;
    CKPTFS_LOG(kInfo) << "kernel readahead stays at its default: writing " << path << ": "
                      << std::strerror(err);
    return;
  }
  CKPTFS_LOG(kInfo) << "kernel readahead " << read_ahead_kb << " KiB (" << path << ")";
}

}  // namespace

absl::StatusOr<std::string> CheckMountpoint(absl::string_view path) {
  const std::string p(path);
  if (p.empty()) return ErrnoStatus(EINVAL, "no mountpoint given (--mountpoint=DIR)");
  struct stat st;
  if (stat(p.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT)
      return ErrnoStatus(ENOENT, absl::StrCat("mountpoint ", p, " does not exist"));
    if (err == ENOTCONN) {
      return ErrnoStatus(ENOTCONN, absl::StrCat("mountpoint ", p,
                                                " is a dead FUSE mount (transport endpoint is not "
                                                "connected); clear it with: fusermount3 -u ",
                                                p));
    }
    return SyscallError(err, absl::StrCat("mountpoint ", p));
  }
  if (!S_ISDIR(st.st_mode)) {
    return ErrnoStatus(ENOTDIR, absl::StrCat("mountpoint ", p, " is not a directory"));
  }
  char resolved[PATH_MAX];
  if (realpath(p.c_str(), resolved) == nullptr) {
    return SyscallError(errno, absl::StrCat("resolving mountpoint ", p));
  }
  const std::string fstype = MountedFsType(resolved);
  if (!fstype.empty()) {
    return ErrnoStatus(EBUSY, absl::StrCat("mountpoint ", p, " is already mounted (", fstype,
                                           "); unmount it first: fusermount3 -u ", p));
  }
  return std::string(resolved);
}

unsigned MaxWorkerThreads(const MountOptions& options) {
  return static_cast<unsigned>(std::max({options.max_threads, options.threads, 1}));
}

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

Mount::Mount(std::unique_ptr<Filesystem> fs, const MountOptions& options)
    : fs_(std::move(fs)), options_(options) {}

absl::StatusOr<std::unique_ptr<Mount>> Mount::Create(std::unique_ptr<Filesystem> fs,
                                                     const MountOptions& options) {
  absl::StatusOr<std::string> mountpoint = CheckMountpoint(options.mountpoint);
  if (!mountpoint.ok()) return mountpoint.status();
  if (options.threads < 1) return ErrnoStatus(EINVAL, "--threads must be at least 1");
  if (options.max_threads < 1) return ErrnoStatus(EINVAL, "--max_threads must be at least 1");

  MountOptions canonical = options;
  canonical.mountpoint = *mountpoint;
  std::unique_ptr<Mount> mount(new Mount(std::move(fs), canonical));
  std::string mount_options = kFixedOptions;
  if (!options.extra_options.empty()) absl::StrAppend(&mount_options, ",", options.extra_options);
  // A mount made by root (a shared /checkpoints) is for every user, each
  // held to the permission bits by default_permissions; without allow_other
  // the kernel would let nobody but root in. Others need user_allow_other
  // in /etc/fuse.conf for it, so they ask for it themselves.
  if (::geteuid() == 0 && !HasOption(options.extra_options, "allow_other")) {
    absl::StrAppend(&mount_options, ",allow_other");
  }
  std::vector<std::string> argv_strings = {"ckptfs-fuse", "-o", mount_options};
  if (options.fuse_debug) argv_strings.push_back("-d");
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  struct fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  const fuse_lowlevel_ops& ops = Filesystem::Ops();
  mount->session_ = fuse_session_new(&args, &ops, sizeof(ops), mount->fs_.get());
  fuse_opt_free_args(&args);
  if (mount->session_ == nullptr) {
    return ErrnoStatus(EINVAL, absl::StrCat("libfuse rejected the mount options \"", mount_options,
                                            "\" (see its message above)"));
  }
  if (fuse_set_signal_handlers(mount->session_) != 0) {
    return ErrnoStatus(EIO, "installing the FUSE signal handlers failed");
  }
  mount->signal_handlers_ = true;
  if (fuse_session_mount(mount->session_, canonical.mountpoint.c_str()) != 0) {
    return ErrnoStatus(EIO, absl::StrCat("mounting ckptfs at ", canonical.mountpoint,
                                         " failed (see libfuse's message above)"));
  }
  mount->mounted_ = true;
  // Same descriptor, our hooks: libfuse then reads and writes through them.
  if (const int rc =
          fuse_session_custom_io(mount->session_, &kKernelIo, fuse_session_fd(mount->session_));
      rc != 0) {
    return SyscallError(-rc, "installing the FUSE session's I/O hooks");
  }
  return mount;
}

Mount::~Mount() {
  if (session_ != nullptr) {
    // Unmounting an already unmounted session (fusermount3 -u) is a no-op.
    if (mounted_) fuse_session_unmount(session_);
    if (signal_handlers_) fuse_remove_signal_handlers(session_);
    fuse_session_destroy(session_);
  }
  fs_.reset();  // closes leftover files, then the Client
}

absl::Status Mount::Run() {
  struct fuse_loop_config* config = fuse_loop_cfg_create();
  if (config == nullptr) return ErrnoStatus(ENOMEM, "fuse_loop_cfg_create");
  // clone_fd: each worker reads from its own /dev/fuse descriptor, so
  // requests don't queue behind one shared read.
  fuse_loop_cfg_set_clone_fd(config, 1);
  // libfuse 3.12+ caps the pool at max_threads (default 10): raise the cap
  // so that ranks blocked in a checkpoint commit (one worker each) never
  // starve other requests, and keep --threads alive when idle, so a storm
  // of ranks rarely waits for a thread to be created.
  fuse_loop_cfg_set_max_threads(config, MaxWorkerThreads(options_));
  fuse_loop_cfg_set_idle_threads(config, static_cast<unsigned>(options_.threads));

  if (options_.read_ahead_kb > 0) {
    // Detached: if the session ends before INIT, the stat never returns
    // until the unmount, and nothing must wait for it.
    std::thread(SetReadAhead, options_.mountpoint, options_.read_ahead_kb).detach();
  }

  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  const int rc = fuse_session_loop_mt(session_, config);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  fuse_loop_cfg_destroy(config);
  // rc > 0 is the signal that ended the loop: a requested, clean end.
  if (rc < 0) return SyscallError(-rc, "FUSE session loop");
  if (rc > 0) {
    CKPTFS_LOG(kInfo) << "signal " << rc << ": unmounting " << options_.mountpoint;
  }
  return absl::OkStatus();
}

}  // namespace ckptfs::fuse
