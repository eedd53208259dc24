// PayloadArena: the storage server's payload memory — one region allocated and
// touched at start-up, carved into aligned buffers for requests in flight.
//
// Every request's payload (and a READ's chunk image) lives in a buffer taken
// from here for the request's lifetime, so the server's buffer memory is
// fixed: it does not grow with connections, requests in flight or chunks
// stored, and serving never touches fresh memory (slow on our VMs). The
// region can be registered with io_uring rings (regions()) so that disk and
// socket I/O on it run as *_FIXED operations without pinning pages per I/O.
//
// Allocation is best fit over kBlockSize blocks, with neighbouring free
// extents merged. A request that does not fit waits in FIFO order, and later
// requests do not pass it, so a large request is not starved by a stream of
// small ones; it is granted as soon as returned memory lets it fit. A buffer
// never exceeds the region (callers size the region for their largest
// request).
//
// Thread-safety: all methods are thread-safe. A grant runs on the thread
// that returned the memory, after the pool's lock is released.
#ifndef CKPTFS_SERVER_STORAGE_PAYLOAD_ARENA_H_
#define CKPTFS_SERVER_STORAGE_PAYLOAD_ARENA_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/aligned_buffer.h"

namespace ckptfs::storage {

class PayloadArena {
 public:
  // A buffer taken from the pool: `size()` bytes at `data()`, kBlockSize
  // aligned. Returns its memory when destroyed. Move-only; must not outlive
  // the pool.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)),
          offset_(other.offset_),
          size_(std::exchange(other.size_, 0)) {}
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        Return();
        pool_ = std::exchange(other.pool_, nullptr);
        offset_ = other.offset_;
        size_ = std::exchange(other.size_, 0);
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { Return(); }

    char* data() const;
    size_t size() const { return size_; }
    // A non-owning AlignedBuffer over bytes [offset, offset + length).
    // REQUIRES: offset and length multiples of kBlockSize, within size().
    AlignedBuffer View(size_t offset, size_t length) const {
      return AlignedBuffer::Borrow(data() + offset, length);
    }
    // Returns the memory now (the destructor's job).
    void Return();

   private:
    friend class PayloadArena;
    Lease(PayloadArena* pool, size_t offset, size_t size)
        : pool_(pool), offset_(offset), size_(size) {}

    PayloadArena* pool_ = nullptr;
    size_t offset_ = 0;
    size_t size_ = 0;
  };

  struct Stats {
    size_t capacity = 0;     // bytes in the region
    size_t in_use = 0;       // bytes held by leases
    size_t peak_in_use = 0;  // the most ever held at once
    size_t leases = 0;       // leases outstanding
    size_t waiting = 0;      // requests queued now
    uint64_t waits = 0;      // requests that ever had to queue
  };

  // Maps and touches a region of `bytes` (rounded up to kBlockSize) that is
  // never given back to the system before the pool is destroyed. ENOMEM
  // when it cannot be mapped.
  static absl::StatusOr<std::unique_ptr<PayloadArena>> Create(size_t bytes);

  PayloadArena(const PayloadArena&) = delete;
  PayloadArena& operator=(const PayloadArena&) = delete;
  // REQUIRES: every lease returned and no request waiting.
  ~PayloadArena();

  // A lease of RoundUpToBlock(max(size, 1)) bytes if that fits now and no
  // request waits; nullopt otherwise (also when size exceeds capacity()).
  std::optional<Lease> TryTake(size_t size);

  // Called with the lease once a waiting request fits.
  using Grant = absl::AnyInvocable<void(Lease)>;
  // A lease now (first) if TryTake would give one; otherwise queues the
  // request and returns a ticket (second, nonzero): `grant` runs later, once,
  // with the lease, on whichever thread returns enough memory.
  // REQUIRES: size <= capacity().
  std::pair<std::optional<Lease>, uint64_t> TakeOrWait(size_t size, Grant grant);

  // Withdraws a queued request. True when it was still queued (its grant
  // never runs); false when its grant has run or is running.
  bool Cancel(uint64_t ticket);

  size_t capacity() const { return capacity_; }
  Stats stats();

  // The region as iovecs of at most 1 GiB each (io_uring's limit on one
  // registered buffer), for io_uring_register_buffers.
  std::vector<iovec> regions() const;

 private:
  struct Waiter {
    uint64_t ticket;
    size_t size;
    Grant grant;
  };

  PayloadArena(char* base, size_t capacity, size_t mapped, char* mapping);
  // Best-fit allocation of `size` bytes (a multiple of kBlockSize); the
  // offset, or nullopt if no free extent is large enough.
  std::optional<size_t> Allocate(size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Free(size_t offset, size_t size);

  char* const base_;
  const size_t capacity_;
  char* const mapping_;  // what to munmap
  const size_t mapped_;
  absl::Mutex mu_;  // leaf lock
  // Free extents by offset (value: length) and by (length, offset).
  std::map<size_t, size_t> free_by_offset_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<size_t, size_t>> free_by_size_ ABSL_GUARDED_BY(mu_);
  std::deque<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

inline char* PayloadArena::Lease::data() const {
  return pool_ == nullptr ? nullptr : pool_->base_ + offset_;
}

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_PAYLOAD_ARENA_H_
