// See metrics.h.
#include "common/metrics/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/metrics/exposition.h"

namespace ckptfs::metrics {

namespace {

[[noreturn]] void Die(const std::string& message) {
  CKPTFS_LOG(kError) << "metrics: " << message;
  std::abort();
}

bool ValidName(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::vector<std::pair<std::string, std::string>> Zip(const std::vector<std::string>& names,
                                                     const std::vector<std::string>& values) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(names.size() + 1);
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], values[i]);
  return out;
}

}  // namespace

Histogram::Histogram(const std::vector<double>& bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  // Prometheus buckets are "less than or equal": the first bound >= value.
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                       bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  double sum = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(sum, sum + value, std::memory_order_relaxed)) {
  }
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot snapshot;
  snapshot.bounds = bounds_;
  snapshot.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = running;
  }
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,     0.25,   0.5,     1,      2.5,   5,      10,    30,   60};
  return kBuckets;
}

template <typename T>
T& Family<T>::WithLabels(const std::vector<std::string>& values) {
  absl::MutexLock lock(&registry_->mu_);
  auto it = children_.find(values);
  if (it != children_.end()) return *it->second;
  std::unique_ptr<T> child;
  if constexpr (std::is_same_v<T, Histogram>) {
    child = std::make_unique<T>(bounds_);
  } else {
    child = std::make_unique<T>();
  }
  T& ref = *child;
  children_.emplace(values, std::move(child));
  return ref;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

CallbackHandle::CallbackHandle(CallbackHandle&& other) noexcept
    : registry_(std::exchange(other.registry_, nullptr)), id_(other.id_) {}

CallbackHandle& CallbackHandle::operator=(CallbackHandle&& other) noexcept {
  if (this != &other) {
    Reset();
    registry_ = std::exchange(other.registry_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

void CallbackHandle::Reset() {
  if (registry_ != nullptr) std::exchange(registry_, nullptr)->RemoveCallback(id_);
}

Registry& Registry::Default() {
  static Registry* registry = new Registry();
  return *registry;
}

Registry::FamilyEntry& Registry::FindOrAdd(const std::string& name, const std::string& help,
                                           const std::vector<std::string>& labels, MetricType type,
                                           const std::vector<double>& bounds) {
  auto it = families_.find(name);
  if (it != families_.end()) {
    if (it->second.type != type || it->second.labels != labels) {
      Die(absl::StrCat(name, " registered twice with different types or labels"));
    }
    return it->second;
  }
  if (!ValidName(name, /*allow_colon=*/true)) Die(absl::StrCat("bad metric name ", name));
  for (const std::string& label : labels) {
    if (!ValidName(label, /*allow_colon=*/false) || label == "le") {
      Die(absl::StrCat(name, ": bad label name ", label));
    }
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      Die(absl::StrCat(name, ": bucket bounds must be finite and ascending"));
    }
  }
  FamilyEntry entry{type, help, labels, nullptr, nullptr};
  switch (type) {
    case MetricType::kCounter: {
      auto family =
          std::shared_ptr<Family<metrics::Counter>>(new Family<metrics::Counter>(this, {}));
      entry.family = family.get();
      entry.owned = family;
      break;
    }
    case MetricType::kGauge: {
      auto family = std::shared_ptr<Family<metrics::Gauge>>(new Family<metrics::Gauge>(this, {}));
      entry.family = family.get();
      entry.owned = family;
      break;
    }
    case MetricType::kHistogram: {
      auto family =
          std::shared_ptr<Family<metrics::Histogram>>(new Family<metrics::Histogram>(this, bounds));
      entry.family = family.get();
      entry.owned = family;
      break;
    }
  }
  return families_.emplace(name, std::move(entry)).first->second;
}

Family<Counter>& Registry::Counter(const std::string& name, const std::string& help,
                                   const std::vector<std::string>& labels) {
  absl::MutexLock lock(&mu_);
  return *static_cast<Family<metrics::Counter>*>(
      FindOrAdd(name, help, labels, MetricType::kCounter, {}).family);
}

Family<Gauge>& Registry::Gauge(const std::string& name, const std::string& help,
                               const std::vector<std::string>& labels) {
  absl::MutexLock lock(&mu_);
  return *static_cast<Family<metrics::Gauge>*>(
      FindOrAdd(name, help, labels, MetricType::kGauge, {}).family);
}

Family<Histogram>& Registry::Histogram(const std::string& name, const std::string& help,
                                       const std::vector<std::string>& labels,
                                       const std::vector<double>& bounds) {
  absl::MutexLock lock(&mu_);
  FamilyEntry& entry = FindOrAdd(name, help, labels, MetricType::kHistogram, bounds);
  auto* family = static_cast<Family<metrics::Histogram>*>(entry.family);
  if (family->bounds_ != bounds) {
    Die(absl::StrCat(name, " registered twice with different buckets"));
  }
  return *family;
}

CallbackHandle Registry::AddGaugeCallback(metrics::Gauge& gauge, std::function<double()> callback) {
  absl::MutexLock lock(&callbacks_mu_);
  const uint64_t id = next_callback_id_++;
  callbacks_.emplace(id, CallbackEntry{&gauge, std::move(callback)});
  return CallbackHandle(this, id);
}

void Registry::RemoveCallback(uint64_t id) {
  // Destroy the callback outside the lock: its captures may be anything.
  std::function<double()> dropped;
  absl::MutexLock lock(&callbacks_mu_);
  auto it = callbacks_.find(id);
  if (it == callbacks_.end()) return;
  dropped = std::move(it->second.callback);
  callbacks_.erase(it);
}

std::string Registry::Render() const {
  std::map<const metrics::Gauge*, double> computed;
  {
    absl::MutexLock callbacks_lock(&callbacks_mu_);
    for (const auto& [id, entry] : callbacks_) computed[entry.gauge] += entry.callback();
  }
  absl::MutexLock lock(&mu_);

  std::string out;
  for (const auto& [name, entry] : families_) {
    absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(entry.help), "\n");
    absl::StrAppend(&out, "# TYPE ", name, " ", TypeName(entry.type), "\n");
    switch (entry.type) {
      case MetricType::kCounter: {
        const auto* family = static_cast<const Family<metrics::Counter>*>(entry.family);
        for (const auto& [values, child] : family->children_) {
          AppendSample(out, name, Zip(entry.labels, values), absl::StrCat(child->value()));
        }
        break;
      }
      case MetricType::kGauge: {
        const auto* family = static_cast<const Family<metrics::Gauge>*>(entry.family);
        for (const auto& [values, child] : family->children_) {
          double value = static_cast<double>(child->value());
          if (auto it = computed.find(child.get()); it != computed.end()) value += it->second;
          AppendSample(out, name, Zip(entry.labels, values), FormatValue(value));
        }
        break;
      }
      case MetricType::kHistogram: {
        const auto* family = static_cast<const Family<metrics::Histogram>*>(entry.family);
        const std::string bucket_name = absl::StrCat(name, "_bucket");
        for (const auto& [values, child] : family->children_) {
          const metrics::Histogram::Snapshot snapshot = child->Take();
          auto labels = Zip(entry.labels, values);
          for (size_t i = 0; i < snapshot.cumulative.size(); ++i) {
            labels.emplace_back("le", i < snapshot.bounds.size() ? FormatValue(snapshot.bounds[i])
                                                                 : std::string("+Inf"));
            AppendSample(out, bucket_name, labels, absl::StrCat(snapshot.cumulative[i]));
            labels.pop_back();
          }
          AppendSample(out, absl::StrCat(name, "_sum"), labels, FormatValue(snapshot.sum));
          AppendSample(out, absl::StrCat(name, "_count"), labels, absl::StrCat(snapshot.count()));
        }
        break;
      }
    }
  }
  return out;
}

}  // namespace ckptfs::metrics
