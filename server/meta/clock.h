// Clock: the service's source of wall-clock time (inode timestamps, server
// heartbeats, orphan grace periods), injectable so tests can move time.
//
// Thread-safety: implementations are thread-safe.
#ifndef CKPTFS_SERVER_META_CLOCK_H_
#define CKPTFS_SERVER_META_CLOCK_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ckptfs::meta {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;

  int64_t NowNs() { return absl::ToUnixNanos(Now()); }
  int64_t NowMs() { return absl::ToUnixMillis(Now()); }

  // The process-wide real clock (never destroyed).
  static Clock* Real();
};

// A clock that moves only when told to. For tests.
class ManualClock : public Clock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

inline Clock* Clock::Real() {
  class RealClock : public Clock {
   public:
    absl::Time Now() override { return absl::Now(); }
  };
  static RealClock* clock = new RealClock();
  return clock;
}

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CLOCK_H_
