// ErrnoCounters: a counter family labelled by errno name ("ENOENT", "EIO";
// "E<n>" for a number glibc has no name for), whose children are found
// without a lock after their first use — errors can be frequent (a Python
// import's stat of missing files), so counting one must stay cheap.
//
// Thread-safety: thread-safe.
#ifndef CKPTFS_COMMON_METRICS_ERRNO_COUNTERS_H_
#define CKPTFS_COMMON_METRICS_ERRNO_COUNTERS_H_

#include <array>
#include <atomic>
#include <string>

#include "common/metrics/metrics.h"

namespace ckptfs::metrics {

// "ENOENT" for ENOENT; "E<n>" for a number without a name.
std::string ErrnoName(int err);

class ErrnoCounters {
 public:
  // `family` has exactly one label (the errno name). It must outlive this.
  explicit ErrnoCounters(Family<Counter>* family) : family_(family) {}
  ErrnoCounters(const ErrnoCounters&) = delete;
  ErrnoCounters& operator=(const ErrnoCounters&) = delete;

  // The child for `err` (first use: one registry lookup).
  Counter& For(int err);

 private:
  static constexpr int kCached = 160;  // errnos below this are cached
  Family<Counter>* const family_;
  std::array<std::atomic<Counter*>, kCached> cache_{};
};

}  // namespace ckptfs::metrics

#endif  // CKPTFS_COMMON_METRICS_ERRNO_COUNTERS_H_
