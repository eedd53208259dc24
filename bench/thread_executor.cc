// The thread kind of RankExecutor (see rank_executor.h): rank tasks taken in
// order by a pool of threads; bytes counted in one atomic; the calling
// thread samples progress and watches for Ctrl-C meanwhile.
#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/cpu.h"
#include "bench/interrupt.h"
#include "bench/rank_executor.h"

namespace ckptfs::bench {
namespace {

class AtomicSink : public ProgressSink {
 public:
  explicit AtomicSink(std::atomic<uint64_t>* bytes) : bytes_(bytes) {}
  void OnBytes(uint64_t bytes) override { bytes_->fetch_add(bytes, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t>* bytes_;
};

class ThreadExecutor : public RankExecutor {
 public:
  ThreadExecutor(std::function<std::unique_ptr<RankIo>()> make_io, int threads)
      : make_io_(std::move(make_io)), threads_(std::max(1, threads)), control_(make_io_()) {}

  absl::StatusOr<RankRun> Run(const std::vector<int>& ranks, const RankTask& task, bool all_at_once,
                              const SampleFn& sample) override {
    const CpuTime process_before = SelfCpu();
    const CpuTime caller_before = ThreadCpu();
    const size_t n = ranks.size();
    const size_t thread_count = all_at_once ? n : std::min(n, static_cast<size_t>(threads_));

    std::atomic<uint64_t> bytes{0};
    std::atomic<size_t> next{0};
    std::atomic<int> done{0};
    std::atomic<bool> stop{false};
    std::vector<std::optional<RankTimes>> results(n);
    absl::Mutex mu;
    size_t finished = 0;       // threads done, guarded by mu
    absl::Status first_error;  // guarded by mu

    auto worker = [&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const size_t i = next.fetch_add(1);
        if (i >= n) break;
        std::unique_ptr<RankIo> io = make_io_();
        AtomicSink sink(&bytes);
        absl::StatusOr<RankTimes> result = task(ranks[i], *io, sink);
        done.fetch_add(1);
        if (result.ok()) {
          results[i] = *result;
          continue;
        }
        stop.store(true);
        absl::MutexLock lock(&mu);
        if (first_error.ok()) {
          first_error =
              absl::Status(result.status().code(),
                           absl::StrCat("rank ", ranks[i], ": ", result.status().message()));
          // Keep the errno payload (ENOSPC and friends) of the rank's error.
          result.status().ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
            first_error.SetPayload(url, payload);
          });
        }
      }
      absl::MutexLock lock(&mu);
      ++finished;
    };
    std::vector<std::thread> pool;
    pool.reserve(thread_count);
    for (size_t t = 0; t < thread_count; ++t) pool.emplace_back(worker);

    bool interrupted = false;
    {
      absl::MutexLock lock(&mu);
      auto all_done = [&] { return finished == thread_count; };
      while (!all_done()) {
        mu.AwaitWithTimeout(absl::Condition(&all_done), absl::Nanoseconds(kSampleIntervalNs));
        mu.Unlock();
        sample(MonotonicNowNs(), bytes.load(), done.load());
        if (InterruptRequested()) {
          interrupted = true;
          stop.store(true);
        }
        mu.Lock();
      }
    }
    for (std::thread& thread : pool) thread.join();
    if (!first_error.ok()) return first_error;
    if (interrupted) return absl::CancelledError("interrupted");
    sample(MonotonicNowNs(), bytes.load(), done.load());

    RankRun run;
    const CpuTime used = (SelfCpu() - process_before) - (ThreadCpu() - caller_before);
    run.rank_cpu_s = used.total_s();
    run.rank_system_cpu_s = used.system_s;
    for (size_t i = 0; i < n; ++i) run.ranks.push_back(RankRecord{ranks[i], *results[i]});
    return run;
  }

  RankIo& ControlIo() override { return *control_; }
  bool ranks_are_processes() const override { return false; }

 private:
  std::function<std::unique_ptr<RankIo>()> make_io_;
  int threads_;
  std::unique_ptr<RankIo> control_;
};

}  // namespace

std::unique_ptr<RankExecutor> MakeThreadExecutor(std::function<std::unique_ptr<RankIo>()> make_io,
                                                 int threads) {
  return std::make_unique<ThreadExecutor>(std::move(make_io), threads);
}

}  // namespace ckptfs::bench
