// ReadCache: a small bounded set of whole chunks of one file, fetched by
// read-ahead or by a reader, shared by every handle of the file so that
// concurrent readers of one file fetch each chunk once.
//
// An entry is either being fetched (a thread fills its buffer with the lock
// released) or ready. Invalidating an entry that is being fetched marks it
// stale: its fetch completes into a buffer nobody reads, and FinishFetch
// drops it. Buffers of evicted entries are reused for later fetches.
//
// Thread-safety: not thread-safe. The owning OpenFileState guards it with
// its mutex; only the buffer of an entry being fetched is written outside
// the lock, by the one thread that started the fetch.
#ifndef CKPTFS_CLIENT_READ_CACHE_H_
#define CKPTFS_CLIENT_READ_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "client/buffer_pool.h"

namespace ckptfs::client {

class ReadCache {
 public:
  // Holds at most `capacity` chunks of `chunk_size` bytes, in buffers from
  // `pool` (borrowed; outlives this). REQUIRES: capacity, chunk_size > 0.
  ReadCache(size_t capacity, uint32_t chunk_size, BufferPool* pool);
  ReadCache(const ReadCache&) = delete;
  ReadCache& operator=(const ReadCache&) = delete;
  // Gives every buffer back to the pool. REQUIRES: no fetch in progress.
  ~ReadCache();

  // Changes the bound; entries over it are evicted by later fetches.
  void set_capacity(size_t capacity) { capacity_ = capacity; }

  enum class Lookup { kMiss, kFetching, kReady };
  // Whether chunk `index` is cached with at least `needed` bytes of the
  // chunk covered (a chunk fetched when the file was shorter covers less).
  Lookup Find(uint64_t index, uint32_t needed) const;

  // Copies chunk bytes [offset, offset + length) to `out`; bytes past what
  // the server stored read as zeros. REQUIRES: Find(index, offset + length)
  // == kReady.
  void Copy(uint64_t index, uint32_t offset, uint32_t length, char* out);

  struct Fetch {
    char* buffer = nullptr;  // chunk_size bytes to fill; nullptr: no room
    uint64_t id = 0;
  };
  // Starts fetching chunk `index`, covering its first `cover` bytes. The
  // buffer is null when the cache is full of fetches in progress. Evicts
  // the least recently used ready entry when full.
  // REQUIRES: Find(index, ...) != kFetching.
  Fetch StartFetch(uint64_t index, uint32_t cover);

  // Ends fetch `id` of `index`: `ok` with `stored` bytes received (the rest
  // of the covered bytes are holes), or !ok to forget the entry. A fetch
  // invalidated meanwhile just gives its buffer back.
  void FinishFetch(uint64_t index, uint64_t id, bool ok, uint32_t stored);

  // Forgets chunk `index` / every chunk at or after `first_index` / all.
  void Invalidate(uint64_t index);
  void InvalidateFrom(uint64_t first_index);
  void Clear();

  // Drops every ready entry and gives idle buffers back to the pool.
  void ReleaseMemory();

 private:
  struct Entry {
    std::unique_ptr<char[]> data;
    uint32_t cover = 0;   // chunk bytes [0, cover) are valid
    uint32_t stored = 0;  // of which [0, stored) came from the server
    bool fetching = false;
    uint64_t fetch_id = 0;
    uint64_t last_use = 0;
  };

  std::unique_ptr<char[]> TakeBuffer();
  // Removes an entry; the buffer of one being fetched moves to stale_.
  void Drop(absl::flat_hash_map<uint64_t, Entry>::iterator it);

  size_t capacity_;
  const uint32_t chunk_size_;
  BufferPool* const pool_;
  uint64_t clock_ = 0;
  uint64_t next_fetch_id_ = 1;
  absl::flat_hash_map<uint64_t, Entry> entries_;
  // Buffers of fetches invalidated while in progress, by fetch id: they
  // are still being written and come back at FinishFetch.
  absl::flat_hash_map<uint64_t, std::unique_ptr<char[]>> stale_;
  std::vector<std::unique_ptr<char[]>> free_;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_READ_CACHE_H_
