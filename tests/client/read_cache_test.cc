// ReadCache and IoExecutor, the small pieces under OpenFileState: cache
// states, holes past the stored bytes, invalidation while a fetch is in
// progress, LRU eviction that spares fetches and pins, pinned buffers that
// outlive invalidation and go back to the pool at the last unpin; the
// executor's parallelism and drain-on-destruction.
#include "client/read_cache.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/buffer_pool.h"
#include "client/io_executor.h"
#include "gtest/gtest.h"

namespace ckptfs::client {
namespace {

constexpr uint32_t kChunk = 16;

// The bytes of a ready entry, read as OpenFileState does: pinned, in place.
std::string Read(ReadCache& cache, uint64_t index, uint32_t offset, uint32_t length) {
  ReadCache::Pinned pinned = cache.Pin(index);
  std::string bytes(pinned.data + offset, length);
  cache.Unpin(pinned.ref);
  return bytes;
}

// Fetches chunk `index` whole, filled with `fill`.
void FetchFilled(ReadCache& cache, uint64_t index, char fill) {
  ReadCache::Fetch fetch = cache.StartFetch(index, kChunk);
  ASSERT_NE(fetch.buffer, nullptr);
  std::memset(fetch.buffer, fill, kChunk);
  cache.FinishFetch(index, fetch.id, /*ok=*/true, kChunk);
}

TEST(ReadCacheTest, FetchThenReadWithHolesAsZeros) {
  BufferPool pool(1 << 20);
  ReadCache cache(4, kChunk, &pool);
  EXPECT_EQ(cache.Find(3, 10), ReadCache::Lookup::kMiss);
  ReadCache::Fetch fetch = cache.StartFetch(3, /*cover=*/12);
  ASSERT_NE(fetch.buffer, nullptr);
  EXPECT_EQ(cache.Find(3, 10), ReadCache::Lookup::kFetching);
  std::memcpy(fetch.buffer, "abcdefgh", 8);
  std::memset(fetch.buffer + 8, 'x', kChunk - 8);  // garbage past the stored bytes
  cache.FinishFetch(3, fetch.id, /*ok=*/true, /*stored=*/8);
  EXPECT_EQ(cache.Find(3, 12), ReadCache::Lookup::kReady);
  EXPECT_EQ(cache.Find(3, 13), ReadCache::Lookup::kMiss);  // covers only 12 bytes
  // Bytes 5..10: "fgh" then hole.
  EXPECT_EQ(Read(cache, 3, 5, 6), std::string("fgh\0\0\0", 6));
}

TEST(ReadCacheTest, FailedFetchIsForgotten) {
  BufferPool pool(1 << 20);
  ReadCache cache(4, kChunk, &pool);
  ReadCache::Fetch fetch = cache.StartFetch(1, kChunk);
  cache.FinishFetch(1, fetch.id, /*ok=*/false, 0);
  EXPECT_EQ(cache.Find(1, 1), ReadCache::Lookup::kMiss);
}

TEST(ReadCacheTest, InvalidatedWhileFetchingIsDropped) {
  BufferPool pool(1 << 20);
  ReadCache cache(4, kChunk, &pool);
  ReadCache::Fetch old_fetch = cache.StartFetch(2, kChunk);
  cache.Invalidate(2);  // a write to chunk 2 landed meanwhile
  EXPECT_EQ(cache.Find(2, 1), ReadCache::Lookup::kMiss);
  ReadCache::Fetch new_fetch = cache.StartFetch(2, kChunk);  // may start again
  ASSERT_NE(new_fetch.buffer, nullptr);
  EXPECT_NE(new_fetch.buffer, old_fetch.buffer);  // the old one is still being written
  std::memset(old_fetch.buffer, 'o', kChunk);
  std::memset(new_fetch.buffer, 'n', kChunk);
  cache.FinishFetch(2, old_fetch.id, true, kChunk);  // stale: ignored
  EXPECT_EQ(cache.Find(2, 1), ReadCache::Lookup::kFetching);
  cache.FinishFetch(2, new_fetch.id, true, kChunk);
  EXPECT_EQ(Read(cache, 2, 0, 1), "n");
}

TEST(ReadCacheTest, EvictsLeastRecentlyUsedButNeverAFetch) {
  BufferPool pool(1 << 20);
  ReadCache cache(2, kChunk, &pool);
  ReadCache::Fetch a = cache.StartFetch(0, kChunk);
  ReadCache::Fetch b = cache.StartFetch(1, kChunk);
  // Full of fetches in progress: no room.
  EXPECT_EQ(cache.StartFetch(2, kChunk).buffer, nullptr);
  cache.FinishFetch(0, a.id, true, kChunk);
  cache.FinishFetch(1, b.id, true, kChunk);
  Read(cache, 0, 0, 1);  // chunk 0 is now the most recently used
  ASSERT_NE(cache.StartFetch(2, kChunk).buffer, nullptr);
  EXPECT_EQ(cache.Find(1, 1), ReadCache::Lookup::kMiss);  // evicted
  EXPECT_EQ(cache.Find(0, 1), ReadCache::Lookup::kReady);
}

// A chunk fetched ahead was last used when its fetch began, before the
// chunks the reader has since read past: plain LRU would evict it first.
TEST(ReadCacheTest, ReadAheadNeverEvictsAChunkTheReaderHasYetToReach) {
  BufferPool pool(1 << 20);
  ReadCache cache(3, kChunk, &pool, /*read_ahead=*/2);
  FetchFilled(cache, 0, 'a');  // the reader's chunk
  for (uint64_t index : {1, 2}) {
    ReadCache::Fetch ahead = cache.StartReadAhead(index, kChunk, /*reader_chunk=*/0);
    ASSERT_NE(ahead.buffer, nullptr);
    cache.FinishFetch(index, ahead.id, true, kChunk);
  }
  Read(cache, 0, 0, 1);  // chunk 0 is now the most recently used
  // Full, and nothing behind the reader: no room, chunks 1 and 2 stay.
  EXPECT_EQ(cache.StartReadAhead(3, kChunk, 0).buffer, nullptr);
  EXPECT_EQ(cache.Find(1, 1), ReadCache::Lookup::kReady);
  EXPECT_EQ(cache.Find(2, 1), ReadCache::Lookup::kReady);
  // The reader moves on to chunk 1: chunk 0 is behind it and goes.
  Read(cache, 1, 0, 1);
  ReadCache::Fetch ahead = cache.StartReadAhead(3, kChunk, /*reader_chunk=*/1);
  ASSERT_NE(ahead.buffer, nullptr);
  cache.FinishFetch(3, ahead.id, true, kChunk);
  EXPECT_EQ(cache.Find(0, 1), ReadCache::Lookup::kMiss);
  EXPECT_EQ(cache.Find(2, 1), ReadCache::Lookup::kReady);
}

TEST(ReadCacheTest, AReadersFetchEvictsBehindItFirstThenLeastRecentlyUsed) {
  BufferPool pool(1 << 20);
  ReadCache cache(3, kChunk, &pool, /*read_ahead=*/2);
  FetchFilled(cache, 5, 'e');  // fetched ahead long ago
  FetchFilled(cache, 6, 'f');
  FetchFilled(cache, 1, 'a');
  Read(cache, 1, 0, 1);  // read just now, and behind the next fetch
  ASSERT_NE(cache.StartFetch(4, kChunk).buffer, nullptr);
  EXPECT_EQ(cache.Find(1, 1), ReadCache::Lookup::kMiss);
  EXPECT_EQ(cache.Find(5, 1), ReadCache::Lookup::kReady);
  EXPECT_EQ(cache.Find(6, 1), ReadCache::Lookup::kReady);
  // Nothing behind chunk 2 can go (4 is still being fetched): the least
  // recently used of the rest does.
  ASSERT_NE(cache.StartFetch(2, kChunk).buffer, nullptr);
  EXPECT_EQ(cache.Find(5, 1), ReadCache::Lookup::kMiss);
  EXPECT_EQ(cache.Find(6, 1), ReadCache::Lookup::kReady);
}

// A reader that moves back (or a second handle starting over) finds the
// cache full of chunks far ahead of it: those are stale, and its fetches
// and read-ahead take them, not the chunks it is about to read.
TEST(ReadCacheTest, ChunksBeyondTheWindowOfAReaderThatMovedBackAreStale) {
  BufferPool pool(1 << 20);
  ReadCache cache(4, kChunk, &pool, /*read_ahead=*/2);
  for (uint64_t index = 10; index < 14; ++index) {
    FetchFilled(cache, index, 'z');
    Read(cache, index, 0, 1);
  }
  FetchFilled(cache, 0, 'a');  // back to the start: 10 (least recently used) goes
  EXPECT_EQ(cache.Find(10, 1), ReadCache::Lookup::kMiss);
  for (uint64_t index : {1, 2}) {
    ReadCache::Fetch ahead = cache.StartReadAhead(index, kChunk, /*reader_chunk=*/0);
    ASSERT_NE(ahead.buffer, nullptr) << index;
    cache.FinishFetch(index, ahead.id, true, kChunk);
  }
  EXPECT_EQ(cache.Find(11, 1), ReadCache::Lookup::kMiss);
  EXPECT_EQ(cache.Find(12, 1), ReadCache::Lookup::kMiss);
  EXPECT_EQ(cache.Find(13, 1), ReadCache::Lookup::kReady);
  for (uint64_t index : {0, 1, 2}) EXPECT_EQ(cache.Find(index, 1), ReadCache::Lookup::kReady);
  // An idle file asked for a buffer gives up a stale one first, too.
  EXPECT_TRUE(cache.GiveUpOne(/*reader_chunk=*/0));
  EXPECT_EQ(cache.Find(13, 1), ReadCache::Lookup::kMiss);
  for (uint64_t index : {0, 1, 2}) EXPECT_EQ(cache.Find(index, 1), ReadCache::Lookup::kReady);
}

TEST(ReadCacheTest, InvalidateFromDropsTheTail) {
  BufferPool pool(1 << 20);
  ReadCache cache(8, kChunk, &pool);
  for (uint64_t i = 0; i < 5; ++i) {
    ReadCache::Fetch f = cache.StartFetch(i, kChunk);
    cache.FinishFetch(i, f.id, true, kChunk);
  }
  cache.InvalidateFrom(2);
  EXPECT_EQ(cache.Find(1, 1), ReadCache::Lookup::kReady);
  EXPECT_EQ(cache.Find(2, 1), ReadCache::Lookup::kMiss);
  EXPECT_EQ(cache.Find(4, 1), ReadCache::Lookup::kMiss);
  cache.ReleaseMemory();
  EXPECT_EQ(cache.Find(0, 1), ReadCache::Lookup::kMiss);
  EXPECT_GT(pool.idle_bytes(), 0u);  // buffers went back to the pool
}

TEST(ReadCacheTest, PinnedEntrySurvivesInvalidateUntilUnpinned) {
  BufferPool pool(1 << 20);
  ReadCache cache(4, kChunk, &pool);
  FetchFilled(cache, 0, 'a');
  ReadCache::Pinned first = cache.Pin(0);
  ReadCache::Pinned second = cache.Pin(0);
  const size_t idle_before = pool.idle_bytes();
  cache.Invalidate(0);  // a write to chunk 0
  EXPECT_EQ(cache.Find(0, 1), ReadCache::Lookup::kMiss);
  EXPECT_EQ(cache.pinned_aside(), 1u);
  // A new fetch of the chunk gets another buffer; the pinned one is intact.
  ReadCache::Fetch again = cache.StartFetch(0, kChunk);
  ASSERT_NE(again.buffer, nullptr);
  EXPECT_NE(again.buffer, first.data);
  std::memset(again.buffer, 'b', kChunk);
  cache.FinishFetch(0, again.id, true, kChunk);
  EXPECT_EQ(std::string(first.data, kChunk), std::string(kChunk, 'a'));
  EXPECT_EQ(Read(cache, 0, 0, kChunk), std::string(kChunk, 'b'));
  // The buffer goes back to the pool at the last unpin, not before.
  cache.Unpin(first.ref);
  EXPECT_EQ(cache.pinned_aside(), 1u);
  EXPECT_EQ(pool.idle_bytes(), idle_before);
  cache.Unpin(second.ref);
  EXPECT_EQ(cache.pinned_aside(), 0u);
  EXPECT_EQ(pool.idle_bytes(), idle_before + kChunk);
  EXPECT_EQ(cache.Find(0, kChunk), ReadCache::Lookup::kReady);  // the new entry stays
}

TEST(ReadCacheTest, UnpinOfALiveEntryKeepsIt) {
  BufferPool pool(1 << 20);
  ReadCache cache(4, kChunk, &pool);
  FetchFilled(cache, 5, 'p');
  ReadCache::Pinned pinned = cache.Pin(5);
  cache.Unpin(pinned.ref);
  EXPECT_EQ(cache.pinned_aside(), 0u);
  EXPECT_EQ(cache.Find(5, kChunk), ReadCache::Lookup::kReady);
  EXPECT_EQ(Read(cache, 5, 3, 2), "pp");
}

TEST(ReadCacheTest, EvictionSkipsPinnedEntries) {
  BufferPool pool(1 << 20);
  ReadCache cache(2, kChunk, &pool);
  FetchFilled(cache, 0, '0');
  FetchFilled(cache, 1, '1');
  ReadCache::Pinned pinned = cache.Pin(0);  // 0 would be the LRU victim...
  Read(cache, 1, 0, 1);                     // ...the more so after this use of 1
  FetchFilled(cache, 2, '2');
  EXPECT_EQ(cache.Find(0, 1), ReadCache::Lookup::kReady);  // pinned: kept
  EXPECT_EQ(cache.Find(1, 1), ReadCache::Lookup::kMiss);   // evicted instead
  // Full of a pinned entry and a fetch: no room, as when full of fetches.
  ReadCache::Fetch fetching = cache.StartFetch(3, kChunk);
  ASSERT_NE(fetching.buffer, nullptr);  // evicted 2
  EXPECT_EQ(cache.StartFetch(4, kChunk).buffer, nullptr);
  EXPECT_EQ(std::string(pinned.data, kChunk), std::string(kChunk, '0'));
  cache.Unpin(pinned.ref);
  ASSERT_NE(cache.StartFetch(4, kChunk).buffer, nullptr);  // 0 may go now
  EXPECT_EQ(cache.Find(0, 1), ReadCache::Lookup::kMiss);
  cache.FinishFetch(3, fetching.id, true, kChunk);
}

TEST(ReadCacheTest, ReleaseMemoryWaitsForPinsBeforeFreeing) {
  BufferPool pool(1 << 20);
  ReadCache cache(4, kChunk, &pool);
  FetchFilled(cache, 0, 'r');
  FetchFilled(cache, 1, 's');
  ReadCache::Pinned pinned = cache.Pin(1);
  cache.ReleaseMemory();                 // the last handle of the file closed
  EXPECT_EQ(pool.idle_bytes(), kChunk);  // only the unpinned buffer
  EXPECT_EQ(std::string(pinned.data, kChunk), std::string(kChunk, 's'));
  // The next fetch must not get the pinned buffer.
  ReadCache::Fetch fetch = cache.StartFetch(1, kChunk);
  EXPECT_NE(fetch.buffer, pinned.data);
  cache.FinishFetch(1, fetch.id, false, 0);
  cache.Unpin(pinned.ref);
  EXPECT_EQ(cache.pinned_aside(), 0u);
  cache.ReleaseMemory();
  EXPECT_EQ(pool.idle_bytes(), 2u * kChunk);
}

TEST(ReadCacheTest, TooShortPinnedEntryIsRefetchedIntoAnotherBuffer) {
  BufferPool pool(1 << 20);
  ReadCache cache(4, kChunk, &pool);
  ReadCache::Fetch fetch = cache.StartFetch(7, /*cover=*/4);  // the file was 4 bytes
  std::memcpy(fetch.buffer, "abcd", 4);
  cache.FinishFetch(7, fetch.id, true, 4);
  ReadCache::Pinned pinned = cache.Pin(7);
  ASSERT_EQ(cache.Find(7, 8), ReadCache::Lookup::kMiss);  // the file grew
  ReadCache::Fetch longer = cache.StartFetch(7, 8);
  ASSERT_NE(longer.buffer, nullptr);
  EXPECT_NE(longer.buffer, pinned.data);
  std::memcpy(longer.buffer, "ABCDEFGH", 8);
  cache.FinishFetch(7, longer.id, true, 8);
  EXPECT_EQ(std::string(pinned.data, 4), "abcd");
  cache.Unpin(pinned.ref);  // of the dropped entry, not the new one
  EXPECT_EQ(Read(cache, 7, 0, 8), "ABCDEFGH");
  EXPECT_EQ(cache.pinned_aside(), 0u);
}

// The pool's read budget bounds every cache together: a cache past it
// reuses its own least recently used buffer, one with nothing to give up
// gets none (its caller reads uncached), and buffers given back return
// their bytes to the budget.
TEST(ReadCacheTest, TheReadBudgetBoundsAllCachesTogether) {
  BufferPool pool(/*max_idle_bytes=*/1 << 20, SIZE_MAX, /*read_budget_bytes=*/3 * kChunk);
  ReadCache a(/*capacity=*/8, kChunk, &pool);
  ReadCache b(/*capacity=*/8, kChunk, &pool);
  FetchFilled(a, 0, 'a');
  FetchFilled(a, 1, 'b');
  FetchFilled(b, 0, 'x');
  EXPECT_EQ(pool.read_reserved_bytes(), 3u * kChunk);

  // a is out of budget: it gives up its least recently used chunk (0).
  (void)Read(a, 1, 0, 1);
  FetchFilled(a, 2, 'c');
  EXPECT_EQ(a.Find(0, 1), ReadCache::Lookup::kMiss);
  EXPECT_EQ(Read(a, 1, 0, 1), "b");
  EXPECT_EQ(Read(a, 2, 0, 1), "c");
  EXPECT_EQ(pool.read_reserved_bytes(), 3u * kChunk);

  // Read-ahead never evicts for memory: it would drop chunks the reader
  // has yet to read.
  EXPECT_EQ(a.StartReadAhead(3, kChunk, /*reader_chunk=*/3).buffer, nullptr);
  EXPECT_EQ(a.Find(1, 1), ReadCache::Lookup::kReady);
  EXPECT_EQ(a.Find(2, 1), ReadCache::Lookup::kReady);

  // b's only chunk is pinned: nothing to give up, no buffer; b is short of
  // budget, not full.
  ReadCache::Pinned pinned = b.Pin(0);
  EXPECT_EQ(b.StartFetch(1, kChunk).buffer, nullptr);
  EXPECT_FALSE(b.GiveUpOne());
  EXPECT_FALSE(b.full());
  b.Unpin(pinned.ref);

  // a lets go of its memory: b may grow.
  a.ReleaseMemory();
  EXPECT_EQ(pool.read_reserved_bytes(), 1u * kChunk);
  FetchFilled(b, 1, 'y');
  FetchFilled(b, 2, 'z');
  EXPECT_EQ(Read(b, 0, 0, 1), "x");
  EXPECT_EQ(pool.read_reserved_bytes(), 3u * kChunk);
  b.ReleaseMemory();
  EXPECT_EQ(pool.read_reserved_bytes(), 0u);
}

// Buffers leave the budget exactly when they go back to the pool: a
// pinned one at its last Unpin, one being fetched at FinishFetch, the rest
// when dropped, evicted, or when the cache goes away.
TEST(ReadCacheTest, EveryBufferGivesItsBudgetBackOnce) {
  BufferPool pool(/*max_idle_bytes=*/1 << 20, SIZE_MAX, /*read_budget_bytes=*/8 * kChunk);
  {
    ReadCache cache(/*capacity=*/8, kChunk, &pool);
    FetchFilled(cache, 0, 'a');
    ReadCache::Pinned pinned = cache.Pin(0);
    cache.Invalidate(0);  // pinned: aside until unpinned
    EXPECT_EQ(pool.read_reserved_bytes(), 1u * kChunk);
    cache.Unpin(pinned.ref);
    EXPECT_EQ(pool.read_reserved_bytes(), 0u);

    ReadCache::Fetch fetch = cache.StartFetch(1, kChunk);
    ASSERT_NE(fetch.buffer, nullptr);
    cache.Invalidate(1);  // being fetched: stale until it finishes
    EXPECT_EQ(pool.read_reserved_bytes(), 1u * kChunk);
    cache.FinishFetch(1, fetch.id, /*ok=*/true, kChunk);
    EXPECT_EQ(pool.read_reserved_bytes(), 0u);

    FetchFilled(cache, 2, 'b');
    FetchFilled(cache, 3, 'c');
    EXPECT_TRUE(cache.GiveUpOne());
    EXPECT_EQ(pool.read_reserved_bytes(), 1u * kChunk);
    cache.set_capacity(1);
    FetchFilled(cache, 4, 'd');  // over the smaller bound: evicts down to it
    EXPECT_EQ(pool.read_reserved_bytes(), 1u * kChunk);
    FetchFilled(cache, 5, 'e');
  }
  EXPECT_EQ(pool.read_reserved_bytes(), 0u);  // the destructor gave the rest back
}

TEST(IoExecutorTest, RunsTasksInParallel) {
  IoExecutor executor(4);
  absl::BlockingCounter started(4);
  absl::Notification release;
  absl::BlockingCounter done(4);
  for (int i = 0; i < 4; ++i) {
    executor.Submit([&] {
      started.DecrementCount();
      release.WaitForNotification();
      done.DecrementCount();
    });
  }
  started.Wait();  // all four run at once, or this never returns
  release.Notify();
  done.Wait();
}

TEST(IoExecutorTest, DestructionRunsEverySubmittedTask) {
  std::atomic<int> ran{0};
  {
    IoExecutor executor(2);
    for (int i = 0; i < 100; ++i) {
      executor.Submit([&] {
        absl::SleepFor(absl::Microseconds(100));
        ++ran;
      });
    }
  }
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace ckptfs::client
