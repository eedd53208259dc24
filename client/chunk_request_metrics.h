// ChunkRequestScope: the client's metrics of one chunk request to a storage
// server, kept by the real transports (uring_chunk_transport.cc,
// blocking_chunk_transport.cc) around each call:
//
//   ckptfs_client_chunk_requests_total{op}            requests finished
//   ckptfs_client_chunk_request_duration_seconds{op}  call to answer, retries included
//   ckptfs_client_chunk_requests_in_flight            calls not answered yet
//   ckptfs_client_chunk_errors_total{kind}            failed calls, by errno name
//   ckptfs_client_chunk_write_bytes_total             payload bytes written
//   ckptfs_client_chunk_read_bytes_total              payload bytes read back
//
// Thread-safety: a scope belongs to the calling thread; the counters are
// shared atomics (no lock, no allocation after the first request).
#ifndef CKPTFS_CLIENT_CHUNK_REQUEST_METRICS_H_
#define CKPTFS_CLIENT_CHUNK_REQUEST_METRICS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ckptfs::client {

enum class ChunkOp { kWrite = 0, kRead = 1, kTrim = 2, kSync = 3 };

// Registers the metrics above (they read 0 until the first request).
void RegisterChunkRequestMetrics();

class ChunkRequestScope {
 public:
  // Counts the request in flight until Finish.
  explicit ChunkRequestScope(ChunkOp op);
  ChunkRequestScope(const ChunkRequestScope&) = delete;
  ChunkRequestScope& operator=(const ChunkRequestScope&) = delete;
  ~ChunkRequestScope();

  // The request ended with `status`, having moved `bytes` of payload
  // (written for kWrite, received for kRead). Returns `status`.
  absl::Status Finish(absl::Status status, size_t bytes);

 private:
  const ChunkOp op_;
  const absl::Time start_;
  bool finished_ = false;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_CHUNK_REQUEST_METRICS_H_
