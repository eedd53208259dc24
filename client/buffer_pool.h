// BufferPool: chunk-sized buffers recycled across all files of a Client.
//
// Writing into fresh memory costs page faults (it runs at a fraction of the
// speed of rewriting touched memory: docs/tuning.md), so the write
// buffers and read-cache buffers of a file that closes go back here and
// serve the next file instead of returning to the allocator. Idle buffers
// beyond `max_idle_bytes` are freed, and so are idle buffers of other sizes
// when a size has none idle: idle plus used memory stays within one buffer
// of the most ever used at once, whatever the chunk sizes. Buffers are
// ChunkBuffers: 4096-aligned, on transparent huge pages from 2 MiB, so a
// local O_DIRECT read can fill one straight from the disk.
//
// It also keeps the Client-wide budgets of extra write buffers (see
// ClientOptions::write_buffer_budget_bytes: TryReserve / Unreserve) and of
// read-cache buffers (ClientOptions::read_cache_budget_bytes:
// TryReserveRead / UnreserveRead).
//
// Metrics (computed at scrape time, summed over a process's pools):
// ckptfs_client_write_buffer_used_bytes (reserved),
// ckptfs_client_write_buffer_limit_bytes (the budget; 0 when unlimited),
// ckptfs_client_read_cache_used_bytes, ckptfs_client_read_cache_limit_bytes
// (the same for the read cache), ckptfs_client_buffer_pool_idle_bytes.
//
// Thread-safety: thread-safe.
#ifndef CKPTFS_CLIENT_BUFFER_POOL_H_
#define CKPTFS_CLIENT_BUFFER_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metrics.h"

namespace ckptfs::client {

// Frees a ChunkBuffer's memory (posix_memalign'd).
struct ChunkBufferFree {
  void operator()(char* p) const { std::free(p); }
};
// A chunk buffer: 4096-aligned, so that an O_DIRECT read can land in it
// (client/local_chunk_transport.h), and from 2 MiB up advised onto
// transparent huge pages, so that such a read is a few block-layer
// segments rather than one per 4 KiB page.
using ChunkBuffer = std::unique_ptr<char[], ChunkBufferFree>;

// A new ChunkBuffer of `size` bytes (> 0), contents unspecified. Out of
// memory: std::bad_alloc, as new[] would.
ChunkBuffer AllocateChunkBuffer(size_t size);

class BufferPool {
 public:
  explicit BufferPool(size_t max_idle_bytes, size_t write_budget_bytes = SIZE_MAX,
                      size_t read_budget_bytes = SIZE_MAX);
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of `size` bytes, contents unspecified: an idle one of that
  // size, else a new one, for which idle buffers of other sizes (at least
  // `size` bytes of them, where there are) are freed. REQUIRES: size > 0.
  ChunkBuffer Acquire(uint32_t size);

  // Gives back a buffer Acquire(size) returned.
  void Release(uint32_t size, ChunkBuffer buffer);

  size_t idle_bytes();

  // Takes `bytes` of the write budget if that much is left.
  bool TryReserve(size_t bytes);
  // Returns bytes TryReserve took.
  void Unreserve(size_t bytes);
  size_t reserved_bytes();

  // Takes `bytes` of the read-cache budget if that much is left.
  bool TryReserveRead(size_t bytes);
  // Returns bytes TryReserveRead took.
  void UnreserveRead(size_t bytes);
  size_t read_reserved_bytes();

 private:
  // Takes `bytes` of `budget` in `reserved` if that much is left.
  static bool TryTake(std::atomic<size_t>& reserved, size_t budget, size_t bytes);

  const size_t max_idle_bytes_;
  const size_t write_budget_bytes_;
  const size_t read_budget_bytes_;
  std::atomic<size_t> reserved_bytes_{0};
  std::atomic<size_t> read_reserved_bytes_{0};
  absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, std::vector<ChunkBuffer>> idle_ ABSL_GUARDED_BY(mu_);
  size_t idle_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Last: the scrape-time gauges go first.
  std::vector<metrics::CallbackHandle> metric_callbacks_;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_BUFFER_POOL_H_
