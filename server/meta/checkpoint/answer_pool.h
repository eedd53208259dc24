// AnswerPool: a few threads that help the thread ending a commit barrier
// answer its waiting commits. Answering one is a gRPC reactor's Finish,
// whose send work (serialising the reply, handing it to the transport, often
// the write itself) runs on the calling thread; for the 512 long polls of a
// 4,096-rank checkpoint that was 8-20 ms of one thread's time. ForEach
// spreads such work over the pool's threads and the caller.
//
// Work is claimed a slice at a time from a shared counter, so a pool thread
// the scheduler leaves waiting delays nothing: the caller (or another pool
// thread) takes the slices it did not. Each index runs exactly once, and
// ForEach returns only after every index ran.
//
// Header-only: server/meta/CMakeLists.txt lists the checkpoint sources and
// is not this folder's to change.
//
// Thread-safety: thread-safe. One ForEach uses the pool at a time; a caller
// that finds it busy runs its own work alone on its thread. `fn` must not
// call ForEach on the same pool. The destructor joins the threads;
// REQUIRES: no ForEach running.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_ANSWER_POOL_H_
#define CKPTFS_SERVER_META_CHECKPOINT_ANSWER_POOL_H_

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ckptfs::meta {

class AnswerPool {
 public:
  // Below this many items ForEach runs them on the caller: waking threads
  // costs more than it saves.
  static constexpr size_t kMinParallel = 32;

  // `threads` helpers (0: ForEach always runs on the caller).
  explicit AnswerPool(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  AnswerPool(const AnswerPool&) = delete;
  AnswerPool& operator=(const AnswerPool&) = delete;
  ~AnswerPool() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& thread : threads_) thread.join();
  }

  // Runs fn(i) once for every i in [0, n), on this thread and the pool's;
  // returns when all have returned, with the CPU time the threads spent on
  // it (all of them together; zero where the thread clock is missing).
  absl::Duration ForEach(size_t n, absl::FunctionRef<void(size_t)> fn) {
    if (threads_.empty() || n < kMinParallel || !run_mu_.TryLock()) {
      const absl::Duration started = ThreadCpuTime();
      for (size_t i = 0; i < n; ++i) fn(i);
      return ThreadCpuTime() - started;
    }
    Job job{fn, n, std::max<size_t>(1, n / (4 * (threads_.size() + 1)))};
    {
      absl::MutexLock lock(&mu_);
      job_ = &job;
      ++generation_;
    }
    job.RunSlices();
    {
      // No helper joins after this; wait for those that did.
      absl::MutexLock lock(&mu_);
      job_ = nullptr;
      auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return helping_ == 0; };
      mu_.Await(absl::Condition(&idle));
    }
    run_mu_.Unlock();
    return absl::Nanoseconds(job.cpu_ns.load(std::memory_order_relaxed));
  }

  // CPU time of the calling thread so far (zero if the clock is missing).
  static absl::Duration ThreadCpuTime() {
    timespec now{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0) return absl::ZeroDuration();
    return absl::DurationFromTimespec(now);
  }

 private:
  struct Job {
    absl::FunctionRef<void(size_t)> fn;
    const size_t n;
    const size_t slice;
    std::atomic<size_t> next{0};
    std::atomic<int64_t> cpu_ns{0};

    void RunSlices() {
      const absl::Duration started = ThreadCpuTime();
      while (true) {
        const size_t begin = next.fetch_add(slice, std::memory_order_relaxed);
        if (begin >= n) break;
        const size_t end = std::min(n, begin + slice);
        for (size_t i = begin; i < end; ++i) fn(i);
      }
      cpu_ns.fetch_add(absl::ToInt64Nanoseconds(ThreadCpuTime() - started),
                       std::memory_order_relaxed);
    }
  };

  void Work() {
    uint64_t seen = 0;
    while (true) {
      Job* job = nullptr;
      {
        absl::MutexLock lock(&mu_);
        auto woken = [this, &seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return stopping_ || generation_ != seen;
        };
        mu_.Await(absl::Condition(&woken));
        if (stopping_) return;
        seen = generation_;
        job = job_;  // null: that job already ended
        if (job != nullptr) ++helping_;
      }
      if (job == nullptr) continue;
      job->RunSlices();
      absl::MutexLock lock(&mu_);
      --helping_;
    }
  }

  // Held by the one ForEach using the threads.
  absl::Mutex run_mu_;
  absl::Mutex mu_;  // after run_mu_
  Job* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int helping_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_ANSWER_POOL_H_
