// AsNobody: fork, drop to uid/gid 65534, run, report the exit code.
#include "tests/integration/as_nobody.h"

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ckptfs::testing {

int AsNobody(const std::function<int()>& act) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0) {
      ::_exit(255);
    }
    ::_exit(act());
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) == 255) {
    return -1;
  }
  return WEXITSTATUS(status);
}

}  // namespace ckptfs::testing
