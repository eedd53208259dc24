// BufferPool: buffers come back for reuse (same memory), per size, up to
// the idle limit; and a Client's closed files leave their buffers there.
// ChunkBuffers are aligned for O_DIRECT (huge-page aligned from 2 MiB).
#include "client/buffer_pool.h"

#include <fcntl.h>

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

TEST(BufferPoolTest, ReusesReleasedBuffersOfTheSameSize) {
  BufferPool pool(1 << 20);
  ChunkBuffer a = pool.Acquire(4096);
  char* const a_memory = a.get();
  pool.Release(4096, std::move(a));
  EXPECT_EQ(pool.idle_bytes(), 4096u);
  ChunkBuffer again = pool.Acquire(4096);
  EXPECT_EQ(again.get(), a_memory);
  EXPECT_EQ(pool.idle_bytes(), 0u);
}

TEST(BufferPoolTest, ChunkBuffersAreAlignedForDirectReads) {
  BufferPool pool(0);
  for (uint32_t size : {4096u, 65536u, 1u << 20, 4u << 20, (4u << 20) + 4096}) {
    ChunkBuffer buffer = pool.Acquire(size);
    const uintptr_t at = reinterpret_cast<uintptr_t>(buffer.get());
    EXPECT_EQ(at % (size >= (2u << 20) ? (2u << 20) : 4096u), 0u) << size;
    buffer[size - 1] = 1;  // all of it is usable
  }
}

// Files of another chunk size do not leave the first size's buffers idle
// beside new ones: a miss frees at least its own size of other idle sizes.
TEST(BufferPoolTest, AMissGivesUpIdleBuffersOfOtherSizes) {
  BufferPool pool(1 << 20);
  ChunkBuffer a = pool.Acquire(4096);
  ChunkBuffer b = pool.Acquire(4096);
  ChunkBuffer c = pool.Acquire(4096);
  pool.Release(4096, std::move(a));
  pool.Release(4096, std::move(b));
  pool.Release(4096, std::move(c));
  EXPECT_EQ(pool.idle_bytes(), 12288u);
  ChunkBuffer big = pool.Acquire(8192);  // two 4096s go
  EXPECT_EQ(pool.idle_bytes(), 4096u);
  pool.Release(8192, std::move(big));
  EXPECT_EQ(pool.idle_bytes(), 12288u);
  ChunkBuffer small = pool.Acquire(4096);  // a hit: nothing given up
  EXPECT_EQ(pool.idle_bytes(), 8192u);
  ChunkBuffer huge = pool.Acquire(65536);  // all there is goes
  EXPECT_EQ(pool.idle_bytes(), 0u);
}

TEST(BufferPoolTest, KeepsNoMoreThanTheIdleLimit) {
  BufferPool pool(10000);
  ChunkBuffer a = pool.Acquire(4096);
  ChunkBuffer b = pool.Acquire(4096);
  ChunkBuffer c = pool.Acquire(4096);
  pool.Release(4096, std::move(a));
  pool.Release(4096, std::move(b));
  pool.Release(4096, std::move(c));  // would exceed 10000: freed
  EXPECT_EQ(pool.idle_bytes(), 8192u);
}

TEST(BufferPoolTest, WriteBudget) {
  BufferPool pool(0, 10000);
  EXPECT_TRUE(pool.TryReserve(4096));
  EXPECT_TRUE(pool.TryReserve(4096));
  EXPECT_FALSE(pool.TryReserve(4096));  // would exceed 10000
  pool.Unreserve(4096);
  EXPECT_TRUE(pool.TryReserve(4096));
  EXPECT_EQ(pool.reserved_bytes(), 8192u);
}

class ClientBufferReuseTest : public ClientFixture {};

TEST_F(ClientBufferReuseTest, RecycledBuffersLeakNoOldBytes) {
  // The first file fills whole chunk buffers with 'A'; they go back to the
  // pool when it closes and serve the second file, whose sparse writes must
  // read back as zeros around them, not as 'A's.
  const std::string full(3 * kTestChunk, 'A');
  auto first = CreateFile("first");
  ASSERT_TRUE(first->Write(0, full.data(), full.size()).ok());
  ASSERT_TRUE(first->Close().ok());
  first.reset();
  auto second = CreateFile("second");
  ASSERT_TRUE(second->Write(100, "0123456789", 10).ok());
  ASSERT_TRUE(second->Write(kTestChunk + 5, "xy", 2).ok());
  const uint64_t ino = second->ino();
  ASSERT_TRUE(second->Close().ok());
  std::string expected(kTestChunk + 7, '\0');
  expected.replace(100, 10, "0123456789");
  expected.replace(kTestChunk + 5, 2, "xy");
  EXPECT_TRUE(SameBytes(ReadAll(ino), expected));
}

}  // namespace
}  // namespace ckptfs::client
