// ReadCache and IoExecutor, the small pieces under OpenFileState: cache
// states, holes past the stored bytes, invalidation while a fetch is in
// progress, LRU eviction that spares fetches; the executor's parallelism
// and drain-on-destruction.
#include "client/read_cache.h"

#include <atomic>
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

TEST(ReadCacheTest, FetchThenCopyWithHolesAsZeros) {
  BufferPool pool(1 << 20);
  ReadCache cache(4, kChunk, &pool);
  EXPECT_EQ(cache.Find(3, 10), ReadCache::Lookup::kMiss);
  ReadCache::Fetch fetch = cache.StartFetch(3, /*cover=*/12);
  ASSERT_NE(fetch.buffer, nullptr);
  EXPECT_EQ(cache.Find(3, 10), ReadCache::Lookup::kFetching);
  std::memcpy(fetch.buffer, "abcdefgh", 8);
  cache.FinishFetch(3, fetch.id, /*ok=*/true, /*stored=*/8);
  EXPECT_EQ(cache.Find(3, 12), ReadCache::Lookup::kReady);
  EXPECT_EQ(cache.Find(3, 13), ReadCache::Lookup::kMiss);  // covers only 12 bytes
  char out[6];
  cache.Copy(3, 5, 6, out);  // bytes 5..10: "fgh" then hole
  EXPECT_EQ(std::string(out, 6), std::string("fgh\0\0\0", 6));
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
  char out[1];
  cache.Copy(2, 0, 1, out);
  EXPECT_EQ(out[0], 'n');
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
  char out[1];
  cache.Copy(0, 0, 1, out);  // chunk 0 is now the most recently used
  ASSERT_NE(cache.StartFetch(2, kChunk).buffer, nullptr);
  EXPECT_EQ(cache.Find(1, 1), ReadCache::Lookup::kMiss);  // evicted
  EXPECT_EQ(cache.Find(0, 1), ReadCache::Lookup::kReady);
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
