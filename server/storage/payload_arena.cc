// See payload_arena.h.
#include "server/storage/payload_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::storage {
namespace {

// The region is aligned to transparent huge pages: fewer page-table entries
// to walk when rings pin it, and faster first touch.
constexpr size_t kHugePage = size_t{2} << 20;
// io_uring refuses a registered buffer over 1 GiB.
constexpr size_t kMaxRegisteredBuffer = size_t{1} << 30;

}  // namespace

absl::StatusOr<std::unique_ptr<PayloadArena>> PayloadArena::Create(size_t bytes) {
  const size_t capacity = RoundUpToBlock(std::max<size_t>(bytes, 1));
  const size_t mapped = capacity + kHugePage;
  void* mapping =
      ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) {
    return SyscallError(errno, absl::StrCat("mmap of a ", capacity, "-byte buffer pool"));
  }
  char* const start = static_cast<char*>(mapping);
  char* const base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(start) + kHugePage - 1) /
                                             kHugePage * kHugePage);
  ::madvise(base, capacity, MADV_HUGEPAGE);  // a hint; fine to fail
  // Touch it all now, not while serving. MADV_POPULATE_WRITE (Linux 5.14)
  // faults the pages in without writing them one by one from here.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  if (::madvise(base, capacity, MADV_POPULATE_WRITE) != 0) {
    if (errno == ENOMEM) {
      ::munmap(mapping, mapped);
      return ErrnoStatus(
          ENOMEM, absl::StrCat("cannot populate a ", capacity, "-byte buffer pool: out of memory"));
    }
    std::memset(base, 0, capacity);
  }
  return std::unique_ptr<PayloadArena>(new PayloadArena(base, capacity, mapped, start));
}

PayloadArena::PayloadArena(char* base, size_t capacity, size_t mapped, char* mapping)
    : base_(base), capacity_(capacity), mapping_(mapping), mapped_(mapped) {
  free_by_offset_.emplace(0, capacity_);
  free_by_size_.emplace(capacity_, 0);
  stats_.capacity = capacity_;
}

PayloadArena::~PayloadArena() {
  {
    absl::MutexLock lock(&mu_);
    if (stats_.leases != 0 || !waiters_.empty()) {
      CKPTFS_LOG(kError) << "buffer pool destroyed with " << stats_.leases << " leases out and "
                         << waiters_.size() << " requests waiting";
    }
  }
  ::munmap(mapping_, mapped_);
}

std::optional<size_t> PayloadArena::Allocate(size_t size) {
  auto it = free_by_size_.lower_bound({size, 0});
  if (it == free_by_size_.end()) return std::nullopt;
  const auto [length, offset] = *it;
  free_by_size_.erase(it);
  free_by_offset_.erase(offset);
  if (length > size) {
    free_by_offset_.emplace(offset + size, length - size);
    free_by_size_.emplace(length - size, offset + size);
  }
  stats_.in_use += size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  ++stats_.leases;
  return offset;
}

std::optional<PayloadArena::Lease> PayloadArena::TryTake(size_t size) {
  const size_t want = RoundUpToBlock(std::max<size_t>(size, 1));
  absl::MutexLock lock(&mu_);
  if (!waiters_.empty() || want > capacity_) return std::nullopt;
  const std::optional<size_t> offset = Allocate(want);
  if (!offset.has_value()) return std::nullopt;
  return Lease(this, *offset, want);
}

std::pair<std::optional<PayloadArena::Lease>, uint64_t> PayloadArena::TakeOrWait(size_t size,
                                                                                 Grant grant) {
  const size_t want = RoundUpToBlock(std::max<size_t>(size, 1));
  absl::MutexLock lock(&mu_);
  if (waiters_.empty()) {
    if (const std::optional<size_t> offset = Allocate(want); offset.has_value()) {
      return {Lease(this, *offset, want), 0};
    }
  }
  const uint64_t ticket = next_ticket_++;
  waiters_.push_back({ticket, want, std::move(grant)});
  ++stats_.waits;
  return {std::nullopt, ticket};
}

bool PayloadArena::Cancel(uint64_t ticket) {
  std::vector<std::pair<Grant, Lease>> granted;
  bool found = false;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->ticket == ticket) {
        const bool was_head = it == waiters_.begin();
        waiters_.erase(it);
        found = true;
        if (!was_head) break;
        // The head blocked everyone behind it; those may fit now.
        while (!waiters_.empty()) {
          const std::optional<size_t> offset = Allocate(waiters_.front().size);
          if (!offset.has_value()) break;
          granted.emplace_back(std::move(waiters_.front().grant),
                               Lease(this, *offset, waiters_.front().size));
          waiters_.pop_front();
        }
        break;
      }
    }
  }
  for (auto& [grant, lease] : granted) std::move(grant)(std::move(lease));
  return found;
}

void PayloadArena::Lease::Return() {
  if (pool_ == nullptr) return;
  PayloadArena* pool = std::exchange(pool_, nullptr);
  pool->Free(offset_, std::exchange(size_, 0));
}

void PayloadArena::Free(size_t offset, size_t size) {
  std::vector<std::pair<Grant, Lease>> granted;
  {
    absl::MutexLock lock(&mu_);
    stats_.in_use -= size;
    --stats_.leases;
    // Merge with the free neighbours on either side.
    auto next = free_by_offset_.lower_bound(offset);
    if (next != free_by_offset_.end() && next->first == offset + size) {
      size += next->second;
      free_by_size_.erase({next->second, next->first});
      next = free_by_offset_.erase(next);
    }
    if (next != free_by_offset_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        free_by_size_.erase({prev->second, prev->first});
        free_by_offset_.erase(prev);
      }
    }
    free_by_offset_.emplace(offset, size);
    free_by_size_.emplace(size, offset);
    while (!waiters_.empty()) {
      const std::optional<size_t> taken = Allocate(waiters_.front().size);
      if (!taken.has_value()) break;
      granted.emplace_back(std::move(waiters_.front().grant),
                           Lease(this, *taken, waiters_.front().size));
      waiters_.pop_front();
    }
    stats_.waiting = waiters_.size();
  }
  for (auto& [grant, lease] : granted) std::move(grant)(std::move(lease));
}

PayloadArena::Stats PayloadArena::stats() {
  absl::MutexLock lock(&mu_);
  Stats stats = stats_;
  stats.waiting = waiters_.size();
  return stats;
}

std::vector<iovec> PayloadArena::regions() const {
  std::vector<iovec> out;
  for (size_t offset = 0; offset < capacity_; offset += kMaxRegisteredBuffer) {
    out.push_back({base_ + offset, std::min(kMaxRegisteredBuffer, capacity_ - offset)});
  }
  return out;
}

}  // namespace ckptfs::storage
