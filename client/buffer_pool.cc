// See buffer_pool.h.
#include "client/buffer_pool.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include "common/huge_page_memory.h"

namespace ckptfs::client {

ChunkBuffer AllocateChunkBuffer(size_t size) {
  const size_t alignment = size >= kHugePageSize ? kHugePageSize : 4096;
  void* memory = nullptr;
  if (::posix_memalign(&memory, alignment, size) != 0) throw std::bad_alloc();
  if (size >= kHugePageSize) ::madvise(memory, size, MADV_HUGEPAGE);  // a hint; fine to fail
  return ChunkBuffer(static_cast<char*>(memory));
}

BufferPool::BufferPool(size_t max_idle_bytes, size_t write_budget_bytes, size_t read_budget_bytes)
    : max_idle_bytes_(max_idle_bytes),
      write_budget_bytes_(write_budget_bytes),
      read_budget_bytes_(read_budget_bytes) {
  metrics::Registry& r = metrics::Registry::Default();
  auto gauge = [&r](const char* name, const char* help) -> metrics::Gauge& {
    return r.Gauge(name, help, {}).WithLabels({});
  };
  metric_callbacks_.push_back(r.AddGaugeCallback(
      gauge("ckptfs_client_write_buffer_used_bytes",
            "Write-behind memory taken from the write-buffer budget (--write_buffer_mb)."),
      [this] { return static_cast<double>(reserved_bytes_.load(std::memory_order_relaxed)); }));
  metric_callbacks_.push_back(r.AddGaugeCallback(
      gauge("ckptfs_client_write_buffer_limit_bytes",
            "The write-buffer budget (--write_buffer_mb); 0 when unlimited."),
      [this] {
        return write_budget_bytes_ == SIZE_MAX ? 0.0 : static_cast<double>(write_budget_bytes_);
      }));
  metric_callbacks_.push_back(r.AddGaugeCallback(
      gauge("ckptfs_client_read_cache_used_bytes",
            "Read-cache memory taken from the read-cache budget (--read_cache_mb)."),
      [this] {
        return static_cast<double>(read_reserved_bytes_.load(std::memory_order_relaxed));
      }));
  metric_callbacks_.push_back(r.AddGaugeCallback(
      gauge("ckptfs_client_read_cache_limit_bytes",
            "The read-cache budget (--read_cache_mb); 0 when unlimited."),
      [this] {
        return read_budget_bytes_ == SIZE_MAX ? 0.0 : static_cast<double>(read_budget_bytes_);
      }));
  metric_callbacks_.push_back(
      r.AddGaugeCallback(gauge("ckptfs_client_buffer_pool_idle_bytes",
                               "Chunk buffers kept for reuse by files opened next."),
                         [this] { return static_cast<double>(idle_bytes()); }));
}

ChunkBuffer BufferPool::Acquire(uint32_t size) {
  std::vector<ChunkBuffer> given_up;
  {
    absl::MutexLock lock(&mu_);
    auto it = idle_.find(size);
    if (it != idle_.end() && !it->second.empty()) {
      ChunkBuffer buffer = std::move(it->second.back());
      it->second.pop_back();
      idle_bytes_ -= size;
      return buffer;
    }
    // A miss: the new buffer replaces idle ones of other sizes (files of
    // another chunk size), at least as many bytes, so that idle and used
    // memory together stay within one buffer of the most used at once.
    size_t freed = 0;
    for (auto& [other_size, buffers] : idle_) {
      while (freed < size && !buffers.empty()) {
        given_up.push_back(std::move(buffers.back()));
        buffers.pop_back();
        idle_bytes_ -= other_size;
        freed += other_size;
      }
      if (freed >= size) break;
    }
  }
  given_up.clear();  // freed outside the lock, before the allocation
  return AllocateChunkBuffer(size);
}

void BufferPool::Release(uint32_t size, ChunkBuffer buffer) {
  if (buffer == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    if (idle_bytes_ + size <= max_idle_bytes_) {
      idle_[size].push_back(std::move(buffer));
      idle_bytes_ += size;
      return;
    }
  }
  // Over the limit: `buffer` is freed here, outside the lock.
}

bool BufferPool::TryTake(std::atomic<size_t>& reserved, size_t budget, size_t bytes) {
  size_t now = reserved.load();
  do {
    if (now + bytes > budget || now + bytes < now) return false;
  } while (!reserved.compare_exchange_weak(now, now + bytes));
  return true;
}

bool BufferPool::TryReserve(size_t bytes) {
  return TryTake(reserved_bytes_, write_budget_bytes_, bytes);
}

void BufferPool::Unreserve(size_t bytes) { reserved_bytes_.fetch_sub(bytes); }

size_t BufferPool::reserved_bytes() { return reserved_bytes_.load(); }

bool BufferPool::TryReserveRead(size_t bytes) {
  return TryTake(read_reserved_bytes_, read_budget_bytes_, bytes);
}

void BufferPool::UnreserveRead(size_t bytes) { read_reserved_bytes_.fetch_sub(bytes); }

size_t BufferPool::read_reserved_bytes() { return read_reserved_bytes_.load(); }

size_t BufferPool::idle_bytes() {
  absl::MutexLock lock(&mu_);
  return idle_bytes_;
}

}  // namespace ckptfs::client
