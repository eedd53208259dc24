// ChildProcess: a daemon started by a test, owned by the test.
//
// Started with fork/exec; the child gets PR_SET_PDEATHSIG(SIGKILL) so that a
// test binary that crashes never leaves servers running behind it. The
// destructor kills (SIGKILL) and reaps the child if it is still running.
// stdout and stderr go to a log file the test can print on failure.
//
// Thread-safety: not thread-safe; one test thread owns a ChildProcess.
#ifndef CKPTFS_TESTS_INTEGRATION_CHILD_PROCESS_H_
#define CKPTFS_TESTS_INTEGRATION_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ckptfs::testing {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with the given arguments, output appended to
  // `log_path`.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(std::vector<std::string> argv,
                                                             const std::string& log_path);
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  // True while the child has not exited (reaps it if it has).
  bool Running();
  // Sends `signal` and waits up to `timeout` for the exit; returns the wait
  // status, or nullopt if it is still running.
  std::optional<int> Stop(int signal, absl::Duration timeout);
  // Waits up to `timeout` for the child to exit by itself.
  std::optional<int> Wait(absl::Duration timeout);
  // The last `bytes` of the log, for failure messages.
  std::string LogTail(size_t bytes = 4096) const;

 private:
  ChildProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  std::string log_path_;
  std::optional<int> exit_status_;
};

}  // namespace ckptfs::testing

#endif  // CKPTFS_TESTS_INTEGRATION_CHILD_PROCESS_H_
