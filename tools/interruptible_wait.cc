// See interruptible_wait.h.
#include "tools/interruptible_wait.h"

#include <signal.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ckptfs::tools {
namespace {

std::atomic<bool> interrupted{false};

void OnSignal(int) { interrupted.store(true); }

}  // namespace

void InstallInterruptHandler() {
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool Interrupted() { return interrupted.load(); }

absl::Status WaitFor(const std::string& what, absl::Duration timeout,
                     const std::function<absl::StatusOr<bool>()>& ready, absl::Duration interval) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (Interrupted()) {
      return absl::CancelledError(absl::StrCat("interrupted while waiting for ", what));
    }
    absl::StatusOr<bool> done = ready();
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out after ", absl::FormatDuration(timeout), " waiting for ", what));
    }
    absl::SleepFor(interval);
  }
}

}  // namespace ckptfs::tools
