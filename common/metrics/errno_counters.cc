// See errno_counters.h.
#include "common/metrics/errno_counters.h"

#include <string.h>

#include "absl/strings/str_cat.h"

namespace ckptfs::metrics {

std::string ErrnoName(int err) {
  const char* name = ::strerrorname_np(err);  // glibc 2.32+
  return name != nullptr ? std::string(name) : absl::StrCat("E", err);
}

Counter& ErrnoCounters::For(int err) {
  if (err >= 0 && err < kCached) {
    if (Counter* cached = cache_[err].load(std::memory_order_acquire)) return *cached;
  }
  Counter& counter = family_->WithLabels({ErrnoName(err)});
  if (err >= 0 && err < kCached) cache_[err].store(&counter, std::memory_order_release);
  return counter;
}

}  // namespace ckptfs::metrics
