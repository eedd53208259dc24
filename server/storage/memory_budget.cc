// See memory_budget.h.
#include "server/storage/memory_budget.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace ckptfs::storage {

void MemoryBudget::Reservation::Release() {
  if (budget_ != nullptr && bytes_ > 0) budget_->Return(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(size_t bytes,
                                                                absl::Duration timeout) {
  if (bytes == 0) return Reservation();
  absl::MutexLock lock(&mu_);
  auto fits = [this, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || reserved_ == 0 || reserved_ + bytes <= limit_;
  };
  const bool woken = mu_.AwaitWithTimeout(absl::Condition(&fits), timeout);
  if (closed_) return ErrnoStatus(ECANCELED, "storage server shutting down");
  if (!woken) {
    return ErrnoStatus(EAGAIN, absl::StrCat("storage server busy: ", reserved_, " of ", limit_,
                                            " payload bytes in use; ", bytes,
                                            " more did not fit within ",
                                            absl::FormatDuration(timeout)));
  }
  reserved_ += bytes;
  return Reservation(this, bytes);
}

void MemoryBudget::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

void MemoryBudget::Return(size_t bytes) {
  absl::MutexLock lock(&mu_);
  reserved_ -= bytes;
}

size_t MemoryBudget::reserved() {
  absl::MutexLock lock(&mu_);
  return reserved_;
}

}  // namespace ckptfs::storage
