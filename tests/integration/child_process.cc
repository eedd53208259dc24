// See child_process.h.
#include "tests/integration/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"

namespace ckptfs::testing {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(std::vector<std::string> argv,
                                                                  const std::string& log_path) {
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return SyscallError(errno, absl::StrCat("open ", log_path));
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return SyscallError(errno, "fork");
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the test died before we got here
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::execv(args[0], args.data());
    const std::string msg = absl::StrCat("exec ", args[0], " failed: ", strerror(errno), "\n");
    ssize_t ignored = ::write(STDERR_FILENO, msg.data(), msg.size());
    (void)ignored;
    ::_exit(127);
  }
  ::close(log_fd);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, log_path));
}

ChildProcess::~ChildProcess() {
  if (Running()) Stop(SIGKILL, absl::Seconds(10));
}

bool ChildProcess::Running() {
  if (exit_status_.has_value()) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = status;
    return false;
  }
  return r == 0;
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (Running()) {
    if (absl::Now() > deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return exit_status_;
}

std::optional<int> ChildProcess::Stop(int signal, absl::Duration timeout) {
  if (Running()) ::kill(pid_, signal);
  return Wait(timeout);
}

std::string ChildProcess::LogTail(size_t bytes) const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

}  // namespace ckptfs::testing
