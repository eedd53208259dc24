// See workload_buffers.h.
#include "bench/workload_buffers.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <new>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ckptfs::bench {

// The free buffers, by size.
class ScratchPool {
 public:
  static ScratchPool& Get() {
    static ScratchPool* pool = new ScratchPool;  // never destroyed
    return *pool;
  }

  ScratchBuffer::Memory Take(size_t min_size, size_t& size) {
    absl::MutexLock lock(&mu_);
    auto it = free_.lower_bound(min_size);
    if (it == free_.end()) return nullptr;
    size = it->first;
    ScratchBuffer::Memory memory = std::move(it->second);
    retained_ -= size;
    free_.erase(it);
    return memory;
  }

  // Keeps `memory` for reuse, or frees it when the pool is full.
  void Give(ScratchBuffer::Memory memory, size_t size) {
    absl::MutexLock lock(&mu_);
    if (retained_ + size > ScratchBuffer::kRetainedBytes) return;  // freed here
    retained_ += size;
    free_.emplace(size, std::move(memory));
  }

 private:
  absl::Mutex mu_;
  std::multimap<size_t, ScratchBuffer::Memory> free_ ABSL_GUARDED_BY(mu_);
  uint64_t retained_ ABSL_GUARDED_BY(mu_) = 0;
};

ScratchBuffer ScratchBuffer::Acquire(size_t min_size) {
  constexpr size_t kAlign = 4096;
  size_t size = 0;
  Memory memory = ScratchPool::Get().Take(min_size, size);
  if (memory == nullptr) {
    size = (std::max<size_t>(min_size, 1) + kAlign - 1) / kAlign * kAlign;
    memory.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, size)));
    if (memory == nullptr) throw std::bad_alloc();
  }
  return ScratchBuffer(std::move(memory), size);
}

ScratchBuffer& ScratchBuffer::operator=(ScratchBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    memory_ = std::move(other.memory_);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ScratchBuffer::~ScratchBuffer() { Release(); }

void ScratchBuffer::Release() {
  if (memory_ != nullptr) ScratchPool::Get().Give(std::move(memory_), size_);
  size_ = 0;
}

}  // namespace ckptfs::bench
