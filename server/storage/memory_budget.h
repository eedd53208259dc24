// MemoryBudget: bounds the payload bytes all connections of a server hold
// at once.
//
// In a save storm thousands of ranks send 4 MiB chunks at the same moment;
// with one buffer per request in flight, memory would grow with the number
// of connections. Each request reserves its payload (and, for READ, its
// reply) before the bytes are received; when the budget is spent the
// connection waits — it stops reading its socket, so TCP pushes back on the
// client — until others finish. A request larger than the whole budget is
// admitted when it is alone, so nothing valid is refused forever.
//
// Thread-safety: all methods are thread-safe. Reservations may be released
// on any thread; they must not outlive the budget.
#ifndef CKPTFS_SERVER_STORAGE_MEMORY_BUDGET_H_
#define CKPTFS_SERVER_STORAGE_MEMORY_BUDGET_H_

#include <cstddef>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ckptfs::storage {

class MemoryBudget {
 public:
  explicit MemoryBudget(size_t limit_bytes) : limit_(limit_bytes) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Bytes held until destroyed. Move-only.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept
        : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
    Reservation& operator=(Reservation&& other) noexcept {
      if (this != &other) {
        Release();
        budget_ = std::exchange(other.budget_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
      }
      return *this;
    }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }

    size_t bytes() const { return bytes_; }

   private:
    friend class MemoryBudget;
    Reservation(MemoryBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {}
    void Release();

    MemoryBudget* budget_ = nullptr;
    size_t bytes_ = 0;
  };

  // Reserves `bytes`, waiting up to `timeout` for room. EAGAIN if there is
  // still none then; ECANCELED once Close() was called.
  absl::StatusOr<Reservation> Reserve(size_t bytes, absl::Duration timeout);

  // Wakes every waiter and refuses later reservations (server shutdown).
  void Close();

  size_t reserved();
  size_t limit() const { return limit_; }

 private:
  void Return(size_t bytes);

  const size_t limit_;
  absl::Mutex mu_;  // leaf lock
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_MEMORY_BUDGET_H_
