// ReadCache: a small bounded set of whole chunks of one file, fetched by
// read-ahead or by a reader, shared by every handle of the file so that
// concurrent readers of one file fetch each chunk once.
//
// An entry is either being fetched (a thread fills its buffer with the lock
// released) or ready. Invalidating an entry that is being fetched marks it
// stale: its fetch completes into a buffer nobody reads, and FinishFetch
// gives it back. Buffers of evicted entries go back to the pool at once.
//
// Every buffer a cache holds (ready, being fetched, or pinned aside) is
// counted in the pool's read-cache budget (BufferPool::TryReserveRead) from
// when the cache takes it from the pool until it gives it back. When the
// budget is spent, a reader's fetch takes the buffer of one of this
// cache's entries (OpenFileState also asks other files to give one up:
// GiveUpOne), a read-ahead fetch takes none (it would evict chunks the
// reader has yet to read); without a buffer the caller reads uncached or
// stops reading ahead.
//
// Which entry goes: a stale one first, then by least recent use. An entry
// is stale for a reader at chunk R when it lies outside R's window [R, R +
// read_ahead]: behind the reader, or beyond its read-ahead (left by a
// reader that has since moved back, or by another handle). Plain LRU would
// evict the next chunk the reader needs: a chunk fetched ahead was last
// used when its fetch began, before the chunks the reader has since read
// past. A read-ahead evicts only stale entries; a reader's own fetch, and
// an idle file asked to give a buffer up, any entry when none is stale.
// With several handles on one file the window is the calling handle's, so
// a leading reader may still evict what a trailing one needs next.
//
// Readers do not copy out of the cache: they pin a ready entry and read its
// buffer in place (e.g. while the FUSE reply hands it to the kernel). A
// pinned buffer is never reused or freed while pinned: invalidating or
// dropping a pinned entry moves its buffer aside, where it stays until its
// last Unpin and then goes back to the BufferPool; eviction takes only
// unpinned ready entries.
//
// Thread-safety: not thread-safe. The owning OpenFileState guards it with
// its mutex; only the buffer of an entry being fetched is written outside
// the lock, by the one thread that started the fetch, and pinned buffers
// are read outside the lock by whoever pinned them.
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
  // `pool` (borrowed; outlives this); `read_ahead` chunks past a reader's
  // own are its window (see above). REQUIRES: capacity, chunk_size > 0.
  ReadCache(size_t capacity, uint32_t chunk_size, BufferPool* pool, uint32_t read_ahead = 0);
  ReadCache(const ReadCache&) = delete;
  ReadCache& operator=(const ReadCache&) = delete;
  // Gives every buffer back to the pool. REQUIRES: no fetch in progress and
  // no pin held.
  ~ReadCache();

  // Changes the bound; entries over it are evicted by later fetches.
  void set_capacity(size_t capacity) { capacity_ = capacity; }
  // Whether the cache holds as many entries as its bound allows.
  bool full() const { return entries_.size() >= capacity_; }

  // Evicts an unpinned ready entry, stale for a reader at `reader_chunk`
  // first, then the least recently used, giving its buffer (and budget)
  // back to the pool; false when no entry can go.
  bool GiveUpOne(uint64_t reader_chunk = 0);

  enum class Lookup { kMiss, kFetching, kReady };
  // Whether chunk `index` is cached with at least `needed` bytes of the
  // chunk covered (a chunk fetched when the file was shorter covers less).
  Lookup Find(uint64_t index, uint32_t needed) const;

  // Names one pin of one entry, still valid after the entry is dropped.
  struct PinRef {
    uint64_t index = 0;
    uint64_t id = 0;  // the entry's fetch id
  };
  struct Pinned {
    // The chunk's bytes [0, cover); bytes past what the server stored read
    // as zeros. Unchanged and readable without the lock until Unpin(ref).
    const char* data = nullptr;
    PinRef ref;
  };
  // Pins chunk `index` (a use, for LRU). Every Pin needs one Unpin.
  // REQUIRES: Find(index, n) == kReady for the n bytes the caller reads.
  Pinned Pin(uint64_t index);
  // Ends a pin. The last pin of a dropped entry gives its buffer back to
  // the pool.
  void Unpin(const PinRef& ref);

  struct Fetch {
    char* buffer = nullptr;  // chunk_size bytes to fill; nullptr: no room
    uint64_t id = 0;
  };
  // Starts a reader's fetch of chunk `index`, covering its first `cover`
  // bytes. Evicts unpinned ready entries while the cache is full, and one
  // more when the pool's read budget is spent: those stale for a reader at
  // `index` first, then the least recently used. The buffer is null
  // when that leaves no room: every entry of a full cache being fetched or
  // pinned, or the budget spent and nothing to evict.
  // REQUIRES: Find(index, ...) != kFetching.
  Fetch StartFetch(uint64_t index, uint32_t cover);
  // Starts a read-ahead fetch of chunk `index` for a reader now at chunk
  // `reader_chunk`. While the cache is full it evicts only unpinned ready
  // entries stale for that reader, never one in its window, and it never
  // evicts for the budget. The buffer is null when that leaves no room.
  // REQUIRES: Find(index, ...) != kFetching.
  Fetch StartReadAhead(uint64_t index, uint32_t cover, uint64_t reader_chunk);

  // Ends fetch `id` of `index`: `ok` with `stored` bytes received (the rest
  // of the covered bytes are holes, zeroed here), or !ok to forget the
  // entry. A fetch invalidated meanwhile just gives its buffer back.
  void FinishFetch(uint64_t index, uint64_t id, bool ok, uint32_t stored);

  // Forgets chunk `index` / every chunk at or after `first_index` / all.
  // Pinned buffers stay readable until unpinned.
  void Invalidate(uint64_t index);
  void InvalidateFrom(uint64_t first_index);
  void Clear();

  // Drops every entry, giving the buffers back to the pool (pinned ones go
  // back at their last Unpin, those being fetched at FinishFetch).
  void ReleaseMemory();

  // Buffers of dropped entries still pinned (for tests and accounting).
  size_t pinned_aside() const { return aside_.size(); }

 private:
  struct Entry {
    ChunkBuffer data;
    uint32_t cover = 0;  // chunk bytes [0, cover) are valid
    bool fetching = false;
    uint64_t fetch_id = 0;
    uint64_t last_use = 0;
    int pins = 0;
  };
  // The buffer of a dropped entry that is still pinned.
  struct Aside {
    ChunkBuffer data;
    int pins = 0;
  };

  // A buffer from the pool within the read budget; nullptr when the
  // budget is spent.
  ChunkBuffer TakeBuffer();
  // Gives a buffer back to the pool, and its bytes back to the budget.
  void GiveBack(ChunkBuffer buffer);
  // Evicts the least recently used unpinned ready entry stale for a reader
  // at `reader_chunk`, or, when there is none and `or_any`, of all; false
  // when none went.
  bool Evict(uint64_t reader_chunk, bool or_any);
  // StartFetch and StartReadAhead: a read-ahead evicts only stale entries
  // and never for the budget.
  Fetch Start(uint64_t index, uint32_t cover, bool read_ahead, uint64_t reader_chunk);
  // Removes an entry; the buffer of one being fetched moves to stale_, that
  // of a pinned one to aside_, any other goes back to the pool.
  void Drop(absl::flat_hash_map<uint64_t, Entry>::iterator it);

  size_t capacity_;
  const uint32_t chunk_size_;
  const uint32_t read_ahead_;
  BufferPool* const pool_;
  uint64_t clock_ = 0;
  uint64_t next_fetch_id_ = 1;
  absl::flat_hash_map<uint64_t, Entry> entries_;
  // Buffers of fetches invalidated while in progress, by fetch id: they
  // are still being written and come back at FinishFetch.
  absl::flat_hash_map<uint64_t, ChunkBuffer> stale_;
  // Buffers of dropped entries still pinned, by fetch id.
  absl::flat_hash_map<uint64_t, Aside> aside_;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_READ_CACHE_H_
