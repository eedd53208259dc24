// See io_executor.h.
#include "client/io_executor.h"

#include <utility>

namespace ckptfs::client {

IoExecutor::IoExecutor(int threads) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

IoExecutor::~IoExecutor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void IoExecutor::Submit(absl::AnyInvocable<void()> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
}

void IoExecutor::Loop() {
  while (true) {
    absl::AnyInvocable<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &IoExecutor::HasWorkOrStopping));
      // Drain before stopping: a submitted chunk write is never dropped.
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace ckptfs::client
