// Polling with a deadline, interruptible by Ctrl-C.
//
// `ckptfs up` and `ckptfs mount` wait for daemons to become ready. While they
// wait, SIGINT/SIGTERM only set a flag (InstallInterruptHandler), so the
// command can stop what it started instead of dying halfway.
// Thread-safe: the flag is an atomic.
#ifndef CKPTFS_TOOLS_INTERRUPTIBLE_WAIT_H_
#define CKPTFS_TOOLS_INTERRUPTIBLE_WAIT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ckptfs::tools {

// From now on SIGINT and SIGTERM set the interrupted flag instead of killing
// the process.
void InstallInterruptHandler();
bool Interrupted();

// Calls `ready` every `interval` until it returns true (OK), returns an
// error (that error), `timeout` passes (DeadlineExceeded "timed out after Ns
// waiting for <what>"), or the user interrupts (Cancelled).
absl::Status WaitFor(const std::string& what, absl::Duration timeout,
                     const std::function<absl::StatusOr<bool>()>& ready,
                     absl::Duration interval = absl::Milliseconds(100));

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_INTERRUPTIBLE_WAIT_H_
