// Cancellation: lets one thread stop another's blocking call early — the
// FUSE daemon uses it when the kernel interrupts a rank's commit (a signal
// reached the process blocked in setxattr), so the rank gets EINTR instead
// of waiting out the barrier.
//
// The blocking side checks cancelled() between steps, sleeps with WaitFor,
// and registers an OnCancel while it waits on something that cannot poll
// (a gRPC call: the callback cancels its context).
//
// Thread-safety: every method may be called from any thread. An OnCancel's
// callback runs on the thread that calls Cancel (or on the registering one,
// if already cancelled) and must not block; the OnCancel's destructor waits
// for a callback already running.
#ifndef CKPTFS_CLIENT_CANCELLATION_H_
#define CKPTFS_CLIENT_CANCELLATION_H_

#include <atomic>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ckptfs::client {

class Cancellation {
 public:
  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // Idempotent. Runs the registered callback, wakes WaitFor.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);
  // Lock-free: safe to call under any lock.
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Sleeps up to `timeout`; returns cancelled().
  bool WaitFor(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // While alive, `callback` runs on Cancel (at once if already cancelled).
  // `cancellation` may be null (then nothing happens). One at a time per
  // Cancellation.
  class OnCancel {
   public:
    OnCancel(Cancellation* cancellation, std::function<void()> callback);
    OnCancel(const OnCancel&) = delete;
    OnCancel& operator=(const OnCancel&) = delete;
    ~OnCancel();

   private:
    Cancellation* const cancellation_;
  };

 private:
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  absl::CondVar cancelled_cv_;
  std::function<void()> callback_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_CANCELLATION_H_
