// ScratchBuffer: payload memory for a rank, leased from a process-wide pool
// so that a rank's second save (or a later rank on the same thread pool)
// writes into memory that is already touched. On these VMs first-touch
// memory fills at ~0.5 GB/s and touched memory at ~17 GB/s, so allocating
// per save would measure the allocator, not the filesystem.
//
// The pool keeps released buffers up to kRetainedBytes in all; a lease takes
// the smallest free buffer that is large enough, or allocates one.
//
// Thread-safety: Acquire and release (destruction) are thread-safe; one
// ScratchBuffer is used by one thread at a time.
#ifndef CKPTFS_BENCH_WORKLOAD_BUFFERS_H_
#define CKPTFS_BENCH_WORKLOAD_BUFFERS_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace ckptfs::bench {

class ScratchBuffer {
 public:
  static constexpr uint64_t kRetainedBytes = uint64_t{16} << 30;

  // A buffer of at least `min_size` bytes (4096-aligned).
  static ScratchBuffer Acquire(size_t min_size);

  ScratchBuffer(ScratchBuffer&& other) noexcept = default;
  ScratchBuffer& operator=(ScratchBuffer&& other) noexcept;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  // Returns the memory to the pool.
  ~ScratchBuffer();

  uint8_t* data() const { return memory_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  using Memory = std::unique_ptr<uint8_t, Free>;
  friend class ScratchPool;

  ScratchBuffer(Memory memory, size_t size) : memory_(std::move(memory)), size_(size) {}
  void Release();

  Memory memory_;
  size_t size_ = 0;
};

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_WORKLOAD_BUFFERS_H_
