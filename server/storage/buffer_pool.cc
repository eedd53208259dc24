// See buffer_pool.h.
#include "server/storage/buffer_pool.h"

#include <algorithm>
#include <utility>

namespace ckptfs::storage {

absl::StatusOr<AlignedBuffer> BufferPool::Take(size_t size) {
  const size_t want = RoundUpToBlock(std::max<size_t>(size, 1));
  {
    absl::MutexLock lock(&mu_);
    // The smallest pooled buffer that fits, unless it would waste over half.
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      const size_t capacity = free_[i].capacity();
      if (capacity >= want && capacity / 2 <= want &&
          (best == free_.size() || capacity < free_[best].capacity())) {
        best = i;
      }
    }
    if (best != free_.size()) {
      AlignedBuffer buffer = std::move(free_[best]);
      free_[best] = std::move(free_.back());
      free_.pop_back();
      pooled_bytes_ -= buffer.capacity();
      buffer.set_size(0);
      return buffer;
    }
  }
  AlignedBuffer buffer;
  if (absl::Status s = buffer.Reserve(want); !s.ok()) return s;
  return buffer;
}

void BufferPool::Give(AlignedBuffer buffer) {
  if (buffer.capacity() == 0) return;
  absl::MutexLock lock(&mu_);
  // A buffer the pool has no room for is freed as `buffer` goes out of
  // scope, after the lock is released.
  if (pooled_bytes_ + buffer.capacity() > max_pooled_bytes_ || free_.size() >= kMaxPooled) {
    return;
  }
  pooled_bytes_ += buffer.capacity();
  free_.push_back(std::move(buffer));
}

size_t BufferPool::pooled_bytes() {
  absl::MutexLock lock(&mu_);
  return pooled_bytes_;
}

}  // namespace ckptfs::storage
