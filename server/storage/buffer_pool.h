// BufferPool: aligned I/O buffers shared by all connections of a server.
//
// A connection takes a buffer for the payload of one request and gives it
// back when the reply is sent, so buffer memory follows the requests in
// flight instead of the number of connections (idle pooled client
// connections hold nothing). Up to `max_pooled_bytes` of returned buffers
// are kept for reuse: allocating and first-touching fresh memory is slow on
// the machines we run on, reusing it is not.
//
// Thread-safety: all methods are thread-safe.
#ifndef CKPTFS_SERVER_STORAGE_BUFFER_POOL_H_
#define CKPTFS_SERVER_STORAGE_BUFFER_POOL_H_

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/aligned_buffer.h"

namespace ckptfs::storage {

class BufferPool {
 public:
  explicit BufferPool(size_t max_pooled_bytes) : max_pooled_bytes_(max_pooled_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer with capacity >= RoundUpToBlock(max(size, 1)) and size() 0:
  // a pooled one not more than twice as large, else a new one. ENOMEM when
  // memory is short.
  absl::StatusOr<AlignedBuffer> Take(size_t size);

  // Returns a buffer for reuse (dropped if the pool is full).
  void Give(AlignedBuffer buffer);

  size_t pooled_bytes();

 private:
  static constexpr size_t kMaxPooled = 256;  // buffers, whatever their size

  const size_t max_pooled_bytes_;
  absl::Mutex mu_;  // leaf lock
  std::vector<AlignedBuffer> free_ ABSL_GUARDED_BY(mu_);
  size_t pooled_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_BUFFER_POOL_H_
