// See op_metrics.h.
#include "fuse/op_metrics.h"

#include "absl/time/clock.h"
#include "common/metrics/errno_counters.h"
#include "common/metrics/metrics.h"

namespace ckptfs::fuse {
namespace {

// The operations as they were before WrapWithMetrics; written once, before
// the session starts, and only read afterwards.
fuse_lowlevel_ops g_inner;

struct OpMetric {
  metrics::Counter* calls;
  metrics::Histogram* latency;
};

metrics::Registry& Registry() { return metrics::Registry::Default(); }

metrics::Gauge& InFlight() {
  static metrics::Gauge& gauge =
      Registry()
          .Gauge("ckptfs_fuse_operations_in_flight", "FUSE requests being served.", {})
          .WithLabels({});
  return gauge;
}

OpMetric MetricFor(const char* op) {
  static metrics::Family<metrics::Counter>& calls = Registry().Counter(
      "ckptfs_fuse_operations_total", "FUSE requests served, by operation.", {"op"});
  static metrics::Family<metrics::Histogram>& latency = Registry().Histogram(
      "ckptfs_fuse_operation_duration_seconds",
      "FUSE request latency in the daemon, from its arrival to its reply, by operation.", {"op"},
      metrics::LatencyBuckets());
  return OpMetric{&calls.WithLabels({op}), &latency.WithLabels({op})};
}

// Times one request: in flight while alive, counted and observed at the end.
class OpScope {
 public:
  explicit OpScope(const OpMetric& metric) : metric_(metric), start_(absl::Now()) {
    InFlight().Add(1);
  }
  ~OpScope() {
    metric_.latency->ObserveDuration(absl::Now() - start_);
    metric_.calls->Increment();
    InFlight().Sub(1);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const OpMetric& metric_;
  const absl::Time start_;
};

struct ByteCounters {
  metrics::Counter& read;
  metrics::Counter& written;
  metrics::ErrnoCounters errors;
};

ByteCounters& Counters() {
  static ByteCounters* counters = new ByteCounters{
      Registry()
          .Counter("ckptfs_fuse_read_bytes_total", "Bytes replied to FUSE reads.", {})
          .WithLabels({}),
      Registry()
          .Counter("ckptfs_fuse_write_bytes_total", "Bytes accepted by FUSE writes.", {})
          .WithLabels({}),
      metrics::ErrnoCounters(&Registry().Counter(
          "ckptfs_fuse_errors_total",
          "FUSE requests answered with an error, by errno name (ENOENT: a name that does "
          "not exist, EIO: a storage or metadata failure).",
          {"errno"})),
  };
  return *counters;
}

}  // namespace

// `op` is the field of fuse_lowlevel_ops, `name` the label. A captureless
// generic lambda converts to the field's function-pointer type.
#define CKPTFS_WRAP_OP(op, name)                      \
  if (ops->op != nullptr) {                           \
    g_inner.op = ops->op;                             \
    ops->op = [](auto... args) {                      \
      static const OpMetric metric = MetricFor(name); \
      OpScope scope(metric);                          \
      g_inner.op(args...);                            \
    };                                                \
  }

void WrapWithMetrics(fuse_lowlevel_ops* ops) {
  CKPTFS_WRAP_OP(lookup, "lookup");
  CKPTFS_WRAP_OP(forget, "forget");
  CKPTFS_WRAP_OP(forget_multi, "forget");
  CKPTFS_WRAP_OP(getattr, "getattr");
  CKPTFS_WRAP_OP(setattr, "setattr");
  CKPTFS_WRAP_OP(readlink, "readlink");
  CKPTFS_WRAP_OP(mknod, "mknod");
  CKPTFS_WRAP_OP(mkdir, "mkdir");
  CKPTFS_WRAP_OP(unlink, "unlink");
  CKPTFS_WRAP_OP(rmdir, "rmdir");
  CKPTFS_WRAP_OP(symlink, "symlink");
  CKPTFS_WRAP_OP(rename, "rename");
  CKPTFS_WRAP_OP(link, "link");
  CKPTFS_WRAP_OP(open, "open");
  CKPTFS_WRAP_OP(read, "read");
  CKPTFS_WRAP_OP(write, "write");
  CKPTFS_WRAP_OP(write_buf, "write");
  CKPTFS_WRAP_OP(flush, "flush");
  CKPTFS_WRAP_OP(release, "release");
  CKPTFS_WRAP_OP(fsync, "fsync");
  CKPTFS_WRAP_OP(opendir, "opendir");
  CKPTFS_WRAP_OP(readdir, "readdir");
  CKPTFS_WRAP_OP(readdirplus, "readdirplus");
  CKPTFS_WRAP_OP(releasedir, "releasedir");
  CKPTFS_WRAP_OP(fsyncdir, "fsyncdir");
  CKPTFS_WRAP_OP(statfs, "statfs");
  CKPTFS_WRAP_OP(setxattr, "setxattr");
  CKPTFS_WRAP_OP(getxattr, "getxattr");
  CKPTFS_WRAP_OP(listxattr, "listxattr");
  CKPTFS_WRAP_OP(removexattr, "removexattr");
  CKPTFS_WRAP_OP(access, "access");
  CKPTFS_WRAP_OP(create, "create");
  CKPTFS_WRAP_OP(fallocate, "fallocate");
  CKPTFS_WRAP_OP(copy_file_range, "copy_file_range");
  CKPTFS_WRAP_OP(lseek, "lseek");
}

#undef CKPTFS_WRAP_OP

void CountErrorReply(int err) { Counters().errors.For(err).Increment(); }
void CountReadBytes(size_t bytes) { Counters().read.Increment(bytes); }
void CountWrittenBytes(size_t bytes) { Counters().written.Increment(bytes); }

}  // namespace ckptfs::fuse
