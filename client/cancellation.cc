// See cancellation.h. The callback runs under mu_, so an OnCancel going
// away (which takes mu_) never races a callback that uses its objects.
#include "client/cancellation.h"

#include <utility>

namespace ckptfs::client {

void Cancellation::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  absl::MutexLock lock(&mu_);
  if (callback_) callback_();
  cancelled_cv_.SignalAll();
}

bool Cancellation::WaitFor(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (!cancelled()) {
    if (cancelled_cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return cancelled();
}

Cancellation::OnCancel::OnCancel(Cancellation* cancellation, std::function<void()> callback)
    : cancellation_(cancellation) {
  if (cancellation_ == nullptr) return;
  absl::MutexLock lock(&cancellation_->mu_);
  cancellation_->callback_ = std::move(callback);
  // A Cancel that came before saw no callback; one racing with us may run
  // it a second time, which callbacks allow.
  if (cancellation_->cancelled()) cancellation_->callback_();
}

Cancellation::OnCancel::~OnCancel() {
  if (cancellation_ == nullptr) return;
  absl::MutexLock lock(&cancellation_->mu_);
  cancellation_->callback_ = nullptr;
}

}  // namespace ckptfs::client
