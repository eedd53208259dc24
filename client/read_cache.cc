// See read_cache.h.
#include "client/read_cache.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

namespace ckptfs::client {

ReadCache::ReadCache(size_t capacity, uint32_t chunk_size, BufferPool* pool, uint32_t read_ahead)
    : capacity_(capacity), chunk_size_(chunk_size), read_ahead_(read_ahead), pool_(pool) {}

ReadCache::~ReadCache() {
  ReleaseMemory();
  // A pin outliving the cache would read freed memory.
  if (!aside_.empty()) std::abort();
  // Fetches never finished (their REQUIRES broken): keep the budget exact.
  for (auto& [id, buffer] : stale_) GiveBack(std::move(buffer));
}

ReadCache::Lookup ReadCache::Find(uint64_t index, uint32_t needed) const {
  auto it = entries_.find(index);
  if (it == entries_.end()) return Lookup::kMiss;
  if (it->second.fetching) return Lookup::kFetching;
  return it->second.cover >= needed ? Lookup::kReady : Lookup::kMiss;
}

ReadCache::Pinned ReadCache::Pin(uint64_t index) {
  Entry& entry = entries_.at(index);
  entry.last_use = ++clock_;
  ++entry.pins;
  return Pinned{entry.data.get(), PinRef{index, entry.fetch_id}};
}

void ReadCache::Unpin(const PinRef& ref) {
  if (auto it = entries_.find(ref.index); it != entries_.end() && it->second.fetch_id == ref.id) {
    --it->second.pins;
    return;
  }
  auto aside = aside_.find(ref.id);
  if (aside == aside_.end()) std::abort();  // unpinned twice: a broken invariant
  if (--aside->second.pins > 0) return;
  GiveBack(std::move(aside->second.data));
  aside_.erase(aside);
}

ChunkBuffer ReadCache::TakeBuffer() {
  if (!pool_->TryReserveRead(chunk_size_)) return nullptr;
  return pool_->Acquire(chunk_size_);
}

void ReadCache::GiveBack(ChunkBuffer buffer) {
  pool_->Release(chunk_size_, std::move(buffer));
  pool_->UnreserveRead(chunk_size_);
}

bool ReadCache::GiveUpOne(uint64_t reader_chunk) { return Evict(reader_chunk, /*or_any=*/true); }

bool ReadCache::Evict(uint64_t reader_chunk, bool or_any) {
  const uint64_t window_end =
      reader_chunk > UINT64_MAX - read_ahead_ ? UINT64_MAX : reader_chunk + read_ahead_;
  auto victim = entries_.end();
  bool victim_stale = false;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->second.fetching || it->second.pins > 0) continue;
    const bool stale = it->first < reader_chunk || it->first > window_end;
    if (!stale && !or_any) continue;
    // Any stale entry beats every entry in the window; then least recent use.
    if (victim == entries_.end() || (stale && !victim_stale) ||
        (stale == victim_stale && it->second.last_use < victim->second.last_use)) {
      victim = it;
      victim_stale = stale;
    }
  }
  if (victim == entries_.end()) return false;
  Drop(victim);
  return true;
}

void ReadCache::Drop(absl::flat_hash_map<uint64_t, Entry>::iterator it) {
  Entry& entry = it->second;
  if (entry.fetching) {
    stale_.emplace(entry.fetch_id, std::move(entry.data));
  } else if (entry.pins > 0) {
    aside_.emplace(entry.fetch_id, Aside{std::move(entry.data), entry.pins});
  } else {
    GiveBack(std::move(entry.data));
  }
  entries_.erase(it);
}

ReadCache::Fetch ReadCache::StartFetch(uint64_t index, uint32_t cover) {
  return Start(index, cover, /*read_ahead=*/false, index);
}

ReadCache::Fetch ReadCache::StartReadAhead(uint64_t index, uint32_t cover, uint64_t reader_chunk) {
  return Start(index, cover, /*read_ahead=*/true, reader_chunk);
}

ReadCache::Fetch ReadCache::Start(uint64_t index, uint32_t cover, bool read_ahead,
                                  uint64_t reader_chunk) {
  if (auto it = entries_.find(index); it != entries_.end()) Drop(it);  // too short
  while (entries_.size() >= capacity_) {
    if (!Evict(reader_chunk, /*or_any=*/!read_ahead)) return Fetch{};
  }
  ChunkBuffer buffer = TakeBuffer();
  // Out of budget: a reader takes an entry's buffer (behind it first).
  if (buffer == nullptr && !read_ahead && Evict(reader_chunk, /*or_any=*/true)) {
    buffer = TakeBuffer();
  }
  if (buffer == nullptr) return Fetch{};
  Entry& entry = entries_[index];
  entry.data = std::move(buffer);
  entry.cover = cover;
  entry.fetching = true;
  entry.fetch_id = next_fetch_id_++;
  entry.last_use = ++clock_;
  entry.pins = 0;
  return Fetch{entry.data.get(), entry.fetch_id};
}

void ReadCache::FinishFetch(uint64_t index, uint64_t id, bool ok, uint32_t stored) {
  if (auto stale = stale_.find(id); stale != stale_.end()) {
    GiveBack(std::move(stale->second));
    stale_.erase(stale);
    return;
  }
  auto it = entries_.find(index);
  if (it == entries_.end() || it->second.fetch_id != id) return;  // cannot happen
  Entry& entry = it->second;
  entry.fetching = false;
  if (!ok) {
    Drop(it);
    return;
  }
  // Readers take the buffer as it is: holes must read as zeros.
  if (stored < entry.cover) std::memset(entry.data.get() + stored, 0, entry.cover - stored);
}

void ReadCache::Invalidate(uint64_t index) {
  if (auto it = entries_.find(index); it != entries_.end()) Drop(it);
}

void ReadCache::InvalidateFrom(uint64_t first_index) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->first >= first_index) Drop(it);
    it = next;
  }
}

void ReadCache::Clear() { InvalidateFrom(0); }

void ReadCache::ReleaseMemory() { Clear(); }

}  // namespace ckptfs::client
