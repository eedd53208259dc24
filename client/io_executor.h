// IoExecutor: a fixed pool of threads that carry chunk requests to the
// storage servers, so that many are in flight at once across servers while
// the caller's thread (a FUSE worker, a tool's rank) goes on.
//
// Tasks run in submission order, each on some pool thread. A task must not
// wait for another task of the same executor (that could deadlock a full
// pool); it may block on the network. Destruction runs every task already
// submitted, then joins the threads.
//
// Thread-safety: Submit may be called from any thread, including tasks.
#ifndef CKPTFS_CLIENT_IO_EXECUTOR_H_
#define CKPTFS_CLIENT_IO_EXECUTOR_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace ckptfs::client {

class IoExecutor {
 public:
  // REQUIRES: threads > 0.
  explicit IoExecutor(int threads);
  IoExecutor(const IoExecutor&) = delete;
  IoExecutor& operator=(const IoExecutor&) = delete;
  ~IoExecutor();

  void Submit(absl::AnyInvocable<void()> task);

 private:
  void Loop();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty();
  }

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_IO_EXECUTOR_H_
