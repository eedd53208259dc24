// See scrubber.h.
#include "server/storage/scrubber.h"

#include <utility>

#include "absl/time/clock.h"
#include "common/log.h"
#include "common/metrics/metrics.h"

namespace ckptfs::storage {
namespace {

struct ScrubMetrics {
  metrics::Counter& chunks;
  metrics::Counter& bytes;
  metrics::Counter& corrupt;
  metrics::Counter& passes;
};

ScrubMetrics& Metrics() {
  static ScrubMetrics* m = [] {
    metrics::Registry& r = metrics::Registry::Default();
    return new ScrubMetrics{
        r.Counter("ckptfs_storage_scrub_chunks_total", "chunks reread and checked by the scrubber",
                  {})
            .WithLabels({}),
        r.Counter("ckptfs_storage_scrub_bytes_total", "chunk file bytes reread by the scrubber", {})
            .WithLabels({}),
        r.Counter("ckptfs_storage_scrub_corrupt_total",
                  "chunks the scrubber found corrupt and moved to quarantine", {})
            .WithLabels({}),
        r.Counter("ckptfs_storage_scrub_passes_total",
                  "whole walks of the store the scrubber completed", {})
            .WithLabels({}),
    };
  }();
  return *m;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scrubber>> Scrubber::Start(Options options, ChunkStore& store) {
  auto ring = Ring::Create(8);
  if (!ring.ok()) return ring.status();
  std::unique_ptr<Scrubber> scrubber(new Scrubber(options, store, *std::move(ring)));
  if (options.bytes_per_s > 0) {
    Scrubber* self = scrubber.get();
    scrubber->thread_ = std::thread([self] { self->Run(); });
  }
  return scrubber;
}

Scrubber::Scrubber(Options options, ChunkStore& store, std::unique_ptr<Ring> ring)
    : options_(options), store_(store), ring_(std::move(ring)) {}

void Scrubber::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool Scrubber::SleepUntil(absl::Time until) {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Duration left = until - absl::Now();
    if (left <= absl::ZeroDuration()) return true;
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), left);
  }
  return false;
}

void Scrubber::Run() {
  if (!SleepUntil(absl::Now() + options_.first_pass_delay)) return;
  for (;;) {
    const PassEnd end = Pass();
    if (end == PassEnd::kStopped) return;
    if (end == PassEnd::kCompleted) {
      passes_completed_.fetch_add(1, std::memory_order_relaxed);
      last_pass_end_ms_.store(absl::ToUnixMillis(absl::Now()), std::memory_order_relaxed);
      Metrics().passes.Increment();
    }
    if (!SleepUntil(absl::Now() + options_.pass_interval)) return;
  }
}

Scrubber::PassEnd Scrubber::Pass() {
  const absl::Time start = absl::Now();
  uint64_t pass_bytes = 0;
  bool stopped = false;
  AlignedBuffer buffer;
  absl::Status walk = store_.ForEachChunk([&](ChunkKey key) {
    absl::StatusOr<ScrubResult> result = store_.Scrub(*ring_, buffer, key);
    if (!result.ok()) {
      // Not a verdict on the chunk (the disk or the file system failed to
      // read it): say so, and go on with the others.
      CKPTFS_LOG(kWarning) << "scrub: " << result.status().message();
    } else if (result->verdict != ScrubVerdict::kGone) {
      chunks_checked_.fetch_add(1, std::memory_order_relaxed);
      bytes_checked_.fetch_add(result->bytes_read, std::memory_order_relaxed);
      Metrics().chunks.Increment();
      Metrics().bytes.Increment(result->bytes_read);
      pass_bytes += result->bytes_read;
      if (result->verdict == ScrubVerdict::kQuarantined) {
        corrupt_found_.fetch_add(1, std::memory_order_relaxed);
        Metrics().corrupt.Increment();
      }
    }
    // Hold the pace: pass_bytes may not run ahead of bytes_per_s.
    const absl::Time due =
        start + absl::Seconds(static_cast<double>(pass_bytes) / options_.bytes_per_s);
    stopped = !SleepUntil(due);
    return !stopped;
  });
  if (stopped) return PassEnd::kStopped;
  if (!walk.ok()) {
    CKPTFS_LOG(kWarning) << "scrub: could not walk the store: " << walk.message();
    return PassEnd::kFailed;
  }
  return PassEnd::kCompleted;
}

meta::ScrubReport Scrubber::Report() const {
  meta::ScrubReport report;
  report.set_chunks_checked(chunks_checked_.load(std::memory_order_relaxed));
  report.set_bytes_checked(bytes_checked_.load(std::memory_order_relaxed));
  report.set_corrupt_found(corrupt_found_.load(std::memory_order_relaxed));
  report.set_passes_completed(passes_completed_.load(std::memory_order_relaxed));
  report.set_last_pass_end_ms(last_pass_end_ms_.load(std::memory_order_relaxed));
  report.set_bytes_per_s_limit(options_.bytes_per_s);
  return report;
}

}  // namespace ckptfs::storage
