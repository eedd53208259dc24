// Metrics: counters, gauges and histograms in labelled families, kept in a
// process-wide Registry and printed in the Prometheus text format (see
// exposition.h) by the daemons' /metrics endpoint (http_server.h).
//
// Use: look a family up once (Registry::Counter etc. return the same family
// for the same name), then the labelled child once, and keep the reference:
//
//   static metrics::Counter& bytes_in = metrics::Registry::Default()
//       .Counter("ckptfs_storage_received_bytes_total", "payload bytes received", {})
//       .WithLabels({});
//   bytes_in.Increment(n);
//
// Families and children are never removed, so those references stay valid
// for the life of the registry (the default one: the whole process).
//
// Thread-safety: everything is thread-safe. Increment/Add/Set/Observe are
// relaxed atomics only (no lock, no allocation) and may run on any hot path.
// Looking up a family or child, registering a callback and rendering take
// the registry's mutex. A gauge callback runs under that mutex at scrape
// time: it must be quick and must not touch the registry.
#ifndef CKPTFS_COMMON_METRICS_METRICS_H_
#define CKPTFS_COMMON_METRICS_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ckptfs::metrics {

class Registry;

// A monotonically increasing count (operations, bytes, errors).
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void Increment(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down (requests in flight, bytes in use). Its
// scraped value is what Set/Add left plus the sum of the callbacks registered
// on it (Registry::AddGaugeCallback), so several objects of one process (two
// storage servers in a test) report their total.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(int64_t value) { value_.store(value, std::memory_order_relaxed); }
  void Add(int64_t delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  void Sub(int64_t delta) { value_.fetch_sub(delta, std::memory_order_relaxed); }
  // The stored value only (callbacks are summed at scrape time).
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Counts observations into fixed buckets (upper bounds, ascending; +Inf is
// implicit) and sums them. Latency histograms observe seconds.
class Histogram {
 public:
  // REQUIRES: `bounds` strictly ascending and finite.
  explicit Histogram(const std::vector<double>& bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double value);
  void ObserveDuration(absl::Duration d) { Observe(absl::ToDoubleSeconds(d)); }

  struct Snapshot {
    std::vector<double> bounds;        // as constructed, without +Inf
    std::vector<uint64_t> cumulative;  // bounds.size() + 1 entries; last is +Inf
    double sum = 0;
    uint64_t count() const { return cumulative.empty() ? 0 : cumulative.back(); }
  };
  // Cumulative counts as Prometheus prints them; count == the +Inf bucket.
  Snapshot Take() const;

 private:
  const std::vector<double> bounds_;
  // Per-bucket (not cumulative) counts; the last one is +Inf.
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
};

// Buckets for request latencies: 50 µs .. 60 s.
const std::vector<double>& LatencyBuckets();

enum class MetricType { kCounter, kGauge, kHistogram };

// A named metric with its label names; children per label-value tuple.
template <typename T>
class Family {
 public:
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  // The child for these label values, created on first use.
  // REQUIRES: as many values as the family has label names.
  T& WithLabels(const std::vector<std::string>& values);

 private:
  friend class Registry;
  Family(Registry* registry, std::vector<double> bounds)
      : registry_(registry), bounds_(std::move(bounds)) {}

  Registry* const registry_;
  const std::vector<double> bounds_;  // histograms only
  // Guarded by registry_->mu_ (children are never erased).
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_;
};

// Removes its gauge callback when destroyed. Move-only.
class CallbackHandle {
 public:
  CallbackHandle() = default;
  CallbackHandle(CallbackHandle&& other) noexcept;
  CallbackHandle& operator=(CallbackHandle&& other) noexcept;
  CallbackHandle(const CallbackHandle&) = delete;
  CallbackHandle& operator=(const CallbackHandle&) = delete;
  ~CallbackHandle() { Reset(); }
  void Reset();

 private:
  friend class Registry;
  CallbackHandle(Registry* registry, uint64_t id) : registry_(registry), id_(id) {}
  Registry* registry_ = nullptr;
  uint64_t id_ = 0;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The process-wide registry the daemons serve. Never destroyed.
  static Registry& Default();

  // The family named `name`, created on first call. A second call with the
  // same name returns the same family; a different type or label names for
  // the same name is a programming error (aborts). Names follow Prometheus
  // rules ([a-zA-Z_:][a-zA-Z0-9_:]*; labels without ':').
  metrics::Family<metrics::Counter>& Counter(const std::string& name, const std::string& help,
                                             const std::vector<std::string>& labels);
  metrics::Family<metrics::Gauge>& Gauge(const std::string& name, const std::string& help,
                                         const std::vector<std::string>& labels);
  // REQUIRES: `bounds` strictly ascending and finite.
  metrics::Family<metrics::Histogram>& Histogram(const std::string& name, const std::string& help,
                                                 const std::vector<std::string>& labels,
                                                 const std::vector<double>& bounds);

  // Adds `callback`'s value to `gauge` at each scrape until the handle is
  // destroyed. `gauge` must come from this registry. The callback runs on
  // the scraping thread under the registry's mutex.
  [[nodiscard]] CallbackHandle AddGaugeCallback(metrics::Gauge& gauge,
                                                std::function<double()> callback);

  // Every family in the text exposition format 0.0.4, families ordered by
  // name and samples by label values (see exposition.h).
  std::string Render() const;

 private:
  template <typename T>
  friend class Family;
  friend class CallbackHandle;

  struct FamilyEntry {
    MetricType type;
    std::string help;
    std::vector<std::string> labels;
    void* family;  // Family<T>* for `type`; owned by `owned`
    std::shared_ptr<void> owned;
  };
  struct CallbackEntry {
    const metrics::Gauge* gauge;
    std::function<double()> callback;
  };

  FamilyEntry& FindOrAdd(const std::string& name, const std::string& help,
                         const std::vector<std::string>& labels, MetricType type,
                         const std::vector<double>& bounds) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveCallback(uint64_t id);

  mutable absl::Mutex mu_;  // the families; never held while callbacks run
  std::map<std::string, FamilyEntry> families_ ABSL_GUARDED_BY(mu_);
  // Held while a scrape runs the callbacks (so a RemoveCallback waits for a
  // running one), never together with mu_ taken first: a slow callback (a
  // KV scan) does not block registering or updating metrics meanwhile.
  mutable absl::Mutex callbacks_mu_;
  std::map<uint64_t, CallbackEntry> callbacks_ ABSL_GUARDED_BY(callbacks_mu_);
  uint64_t next_callback_id_ ABSL_GUARDED_BY(callbacks_mu_) = 1;
};

}  // namespace ckptfs::metrics

#endif  // CKPTFS_COMMON_METRICS_METRICS_H_
