// AsNobody: runs a check as another local user, for tests of what the
// permission bits let that user do (root only: the child setuid()s).
//
// Thread-safety: forks; call it from the test's main thread, with
// everything the check touches prepared before the call (the child runs
// only `act` and exits).
#ifndef CKPTFS_TESTS_INTEGRATION_AS_NOBODY_H_
#define CKPTFS_TESTS_INTEGRATION_AS_NOBODY_H_

#include <sys/types.h>

#include <functional>

namespace ckptfs::testing {

constexpr uid_t kNobody = 65534;  // uid and gid of the other user

// Runs `act` in a child process that has become uid and gid kNobody with
// no supplementary groups; returns what `act` returned (its exit code: 0,
// or an errno or step number of the caller's choosing, below 255), or -1
// if the child could not become that user or did not exit normally.
int AsNobody(const std::function<int()>& act);

}  // namespace ckptfs::testing

#endif  // CKPTFS_TESTS_INTEGRATION_AS_NOBODY_H_
