// mount.fuse.ckptfs: the mount(8) helper, so that
//   mount -t fuse.ckptfs 127.0.0.1:7000 /checkpoints -o threads=32
// and the /etc/fstab line
//   127.0.0.1:7000  /checkpoints  fuse.ckptfs  _netdev,allow_other  0  0
// mount ckptfs like any other filesystem (install it as /sbin/mount.fuse.ckptfs;
// /sbin/mount.ckptfs serves `mount -t ckptfs`). Options: mount_options.h.
//
// It runs ckptfs-fuse (found beside this program, else on PATH) with the
// daemon's stderr on the log file, waits until ckptfs-fuse reports the mount
// live or failed, and exits with its status; on failure it copies what the
// daemon logged during the attempt to its own stderr, so mount(8) shows the
// reason. `umount /checkpoints` unmounts; the daemon then exits by itself.
//
// Exit status: 0 mounted; 1 the mount failed (reason on stderr); 2 bad usage.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/unique_fd.h"
#include "fuse/mount_helper/mount_options.h"

namespace ckptfs::tools {
namespace {

constexpr char kDefaultConfig[] = "/etc/ckptfs/fuse.conf";
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int Fail(const std::string& message, int code = kExitFailure) {
  std::cerr << "mount.fuse.ckptfs: " << message << "\n";
  return code;
}

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// ckptfs-fuse beside this program (a symlink in /sbin resolves to the real
// install directory), else the first on PATH (mount(8) sets a short one) or
// in /usr/local/bin.
std::string FindFuseDaemon() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::string sibling = (self.parent_path() / "ckptfs-fuse").string();
    if (IsExecutable(sibling)) return sibling;
  }
  const char* path_env = std::getenv("PATH");
  std::string search = path_env != nullptr ? path_env : "";
  absl::StrAppend(&search, ":/usr/local/bin:/usr/bin");
  for (absl::string_view dir : absl::StrSplit(search, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/ckptfs-fuse");
    if (IsExecutable(candidate)) return candidate;
  }
  return "";
}

// Opens (creating its directory) the daemon's log for appending; an invalid
// fd, with a warning, when that is impossible: the mount still goes ahead.
UniqueFd OpenLog(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    std::cerr << "mount.fuse.ckptfs: warning: cannot open the log " << path << ": "
              << std::strerror(errno) << "; the daemon will not log\n";
  }
  return UniqueFd(fd);
}

// What the daemon appended to the log from `offset` on (at most 16 KiB).
std::string LogSince(const std::string& path, off_t offset) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return "";
  std::string text(16 << 10, '\0');
  const ssize_t n = pread(fd.get(), text.data(), text.size(), offset);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<MountRequest> request = ParseMountArgs(args);
  if (!request.ok()) return Fail(std::string(request.status().message()), kExitUsage);
  if (!request->mountpoint.empty() && request->mountpoint[0] != '/') {
    std::error_code ec;
    request->mountpoint = std::filesystem::absolute(request->mountpoint, ec).string();
  }
  const std::string default_config = access(kDefaultConfig, R_OK) == 0 ? kDefaultConfig : "";
  absl::StatusOr<FuseInvocation> invocation = TranslateMount(*request, default_config);
  if (!invocation.ok()) return Fail(std::string(invocation.status().message()), kExitUsage);
  for (const std::string& arg : invocation->args) {
    if (absl::StartsWith(arg, "--flagfile=") && access(arg.c_str() + 11, R_OK) != 0) {
      return Fail(
          absl::StrCat("cannot read the config file ", arg.substr(11), ": ", std::strerror(errno)));
    }
  }
  const std::string daemon = FindFuseDaemon();
  if (daemon.empty()) {
    return Fail("ckptfs-fuse not found beside this program, on PATH or in /usr/local/bin");
  }
  std::vector<std::string> command = {daemon};
  command.insert(command.end(), invocation->args.begin(), invocation->args.end());
  if (request->fake || request->verbose) {
    std::cerr << absl::StrJoin(command, " ") << "  (log: " << invocation->log_file << ")\n";
  }
  if (request->fake) return 0;

  UniqueFd log = OpenLog(invocation->log_file);
  const off_t log_start = log.valid() ? lseek(log.get(), 0, SEEK_END) : 0;
  std::vector<char*> exec_argv;
  for (std::string& arg : command) exec_argv.push_back(arg.data());
  exec_argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Fail(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    if (log.valid()) dup2(log.get(), STDERR_FILENO);
    execv(exec_argv[0], exec_argv.data());
    const std::string message = absl::StrCat("mount.fuse.ckptfs: cannot run ", command[0], ": ",
                                             std::strerror(errno), "\n");
    (void)!write(STDERR_FILENO, message.data(), message.size());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Fail(absl::StrCat("waitpid: ", std::strerror(errno)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (log.valid()) std::cerr << LogSince(invocation->log_file, log_start);
  return Fail(absl::StrCat("ckptfs-fuse ",
                           WIFEXITED(status)
                               ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                               : absl::StrCat("died of signal ", WTERMSIG(status)),
                           "; the mount did not happen",
                           log.valid() ? absl::StrCat(" (log: ", invocation->log_file, ")") : ""));
}

}  // namespace
}  // namespace ckptfs::tools

int main(int argc, char** argv) { return ckptfs::tools::Main(argc, argv); }
