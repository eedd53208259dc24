// See chunk_request_metrics.h.
#include "client/chunk_request_metrics.h"

#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/metrics/errno_counters.h"
#include "common/metrics/metrics.h"

namespace ckptfs::client {
namespace {

struct ClientChunkMetrics {
  metrics::Counter* requests[4];
  metrics::Histogram* latency[4];
  metrics::Gauge* in_flight;
  metrics::Counter* written;
  metrics::Counter* read;
  metrics::ErrnoCounters* errors;
};

const ClientChunkMetrics& Metrics() {
  static const ClientChunkMetrics* m = [] {
    metrics::Registry& r = metrics::Registry::Default();
    auto* out = new ClientChunkMetrics();
    auto& requests = r.Counter("ckptfs_client_chunk_requests_total",
                               "Chunk requests to storage servers finished, by op.", {"op"});
    auto& latency =
        r.Histogram("ckptfs_client_chunk_request_duration_seconds",
                    "Chunk request latency from the call to its answer (retries included), by op.",
                    {"op"}, metrics::LatencyBuckets());
    const char* const names[] = {"WRITE", "READ", "TRIM", "SYNC"};
    for (int i = 0; i < 4; ++i) {
      out->requests[i] = &requests.WithLabels({names[i]});
      out->latency[i] = &latency.WithLabels({names[i]});
    }
    out->in_flight = &r.Gauge("ckptfs_client_chunk_requests_in_flight",
                              "Chunk requests sent to storage servers and not answered yet.", {})
                          .WithLabels({});
    out->written = &r.Counter("ckptfs_client_chunk_write_bytes_total",
                              "Payload bytes written to storage servers.", {})
                        .WithLabels({});
    out->read = &r.Counter("ckptfs_client_chunk_read_bytes_total",
                           "Payload bytes read from storage servers.", {})
                     .WithLabels({});
    out->errors = new metrics::ErrnoCounters(&r.Counter(
        "ckptfs_client_chunk_errors_total",
        "Chunk requests that failed (after retries), by errno (ENOENT: a hole).", {"kind"}));
    return out;
  }();
  return *m;
}

}  // namespace

void RegisterChunkRequestMetrics() { Metrics(); }

ChunkRequestScope::ChunkRequestScope(ChunkOp op) : op_(op), start_(absl::Now()) {
  Metrics().in_flight->Add(1);
}

ChunkRequestScope::~ChunkRequestScope() {
  if (!finished_) Finish(absl::OkStatus(), 0).IgnoreError();
}

absl::Status ChunkRequestScope::Finish(absl::Status status, size_t bytes) {
  if (finished_) return status;
  finished_ = true;
  const ClientChunkMetrics& m = Metrics();
  const int i = static_cast<int>(op_);
  m.in_flight->Sub(1);
  m.requests[i]->Increment();
  m.latency[i]->ObserveDuration(absl::Now() - start_);
  if (!status.ok()) {
    m.errors->For(ErrnoFromStatus(status)).Increment();
  } else if (op_ == ChunkOp::kWrite) {
    m.written->Increment(bytes);
  } else if (op_ == ChunkOp::kRead) {
    m.read->Increment(bytes);
  }
  return status;
}

}  // namespace ckptfs::client
