// See read_cache.h.
#include "client/read_cache.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <utility>

namespace ckptfs::client {

ReadCache::ReadCache(size_t capacity, uint32_t chunk_size, BufferPool* pool)
    : capacity_(capacity), chunk_size_(chunk_size), pool_(pool) {}

ReadCache::~ReadCache() { ReleaseMemory(); }

ReadCache::Lookup ReadCache::Find(uint64_t index, uint32_t needed) const {
  auto it = entries_.find(index);
  if (it == entries_.end()) return Lookup::kMiss;
  if (it->second.fetching) return Lookup::kFetching;
  return it->second.cover >= needed ? Lookup::kReady : Lookup::kMiss;
}

void ReadCache::Copy(uint64_t index, uint32_t offset, uint32_t length, char* out) {
  Entry& entry = entries_.at(index);
  entry.last_use = ++clock_;
  uint32_t from_data = 0;
  if (offset < entry.stored) from_data = std::min(length, entry.stored - offset);
  if (from_data > 0) std::memcpy(out, entry.data.get() + offset, from_data);
  if (from_data < length) std::memset(out + from_data, 0, length - from_data);
}

std::unique_ptr<char[]> ReadCache::TakeBuffer() {
  if (!free_.empty()) {
    std::unique_ptr<char[]> buffer = std::move(free_.back());
    free_.pop_back();
    return buffer;
  }
  return pool_->Acquire(chunk_size_);
}

void ReadCache::Drop(absl::flat_hash_map<uint64_t, Entry>::iterator it) {
  if (it->second.fetching) {
    stale_.emplace(it->second.fetch_id, std::move(it->second.data));
  } else {
    free_.push_back(std::move(it->second.data));
  }
  entries_.erase(it);
}

ReadCache::Fetch ReadCache::StartFetch(uint64_t index, uint32_t cover) {
  if (auto it = entries_.find(index); it != entries_.end()) Drop(it);  // too short
  if (entries_.size() >= capacity_) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.fetching) continue;
      if (victim == entries_.end() || it->second.last_use < victim->second.last_use) victim = it;
    }
    if (victim == entries_.end()) return Fetch{};
    Drop(victim);
  }
  Entry& entry = entries_[index];
  entry.data = TakeBuffer();
  entry.cover = cover;
  entry.stored = 0;
  entry.fetching = true;
  entry.fetch_id = next_fetch_id_++;
  entry.last_use = ++clock_;
  return Fetch{entry.data.get(), entry.fetch_id};
}

void ReadCache::FinishFetch(uint64_t index, uint64_t id, bool ok, uint32_t stored) {
  if (auto stale = stale_.find(id); stale != stale_.end()) {
    free_.push_back(std::move(stale->second));
    stale_.erase(stale);
    return;
  }
  auto it = entries_.find(index);
  if (it == entries_.end() || it->second.fetch_id != id) return;  // cannot happen
  it->second.fetching = false;
  if (!ok) {
    Drop(it);
    return;
  }
  it->second.stored = std::min(stored, it->second.cover);
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

void ReadCache::ReleaseMemory() {
  Clear();
  for (std::unique_ptr<char[]>& buffer : free_) pool_->Release(chunk_size_, std::move(buffer));
  free_.clear();
}

}  // namespace ckptfs::client
