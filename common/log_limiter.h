// LogLimiter: a few log lines, then at most one per interval, for an event
// that a peer can cause at will (a refused connection or call), so that a port scan or a
// misconfigured client retrying in a loop cannot fill the disk with logs.
// The events held back are counted and reported with the next line let
// through ("... (N more like it not logged)").
//
// Thread-safety: thread-safe.
#ifndef CKPTFS_COMMON_LOG_LIMITER_H_
#define CKPTFS_COMMON_LOG_LIMITER_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ckptfs {

class LogLimiter {
 public:
  // Up to `burst` lines at once, then one per `interval` (a token bucket).
  explicit LogLimiter(absl::Duration interval, int burst = 10)
      : interval_(interval), burst_(burst), tokens_(burst) {}

  // True if a line may be written now. `*held_back` then says how many
  // events were not logged since the last line that was ("" or
  // " (N more like it not logged)"), to append to the line.
  bool Allow(std::string* held_back) {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (last_refill_ != absl::InfinitePast()) {
      tokens_ = std::min<double>(burst_, tokens_ + (now - last_refill_) / interval_);
    }
    last_refill_ = now;
    if (tokens_ < 1) {
      ++held_back_;
      return false;
    }
    tokens_ -= 1;
    *held_back = held_back_ == 0 ? "" : absl::StrCat(" (", held_back_, " more like it not logged)");
    held_back_ = 0;
    return true;
  }

 private:
  const absl::Duration interval_;
  const int burst_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_refill_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t held_back_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_LOG_LIMITER_H_
