// BufferPool: aligned buffers of the asked size, reuse of returned ones, and
// the cap on what it keeps.
#include "server/storage/buffer_pool.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace ckptfs::storage {
namespace {

TEST(BufferPoolTest, TakesAlignedBuffersBigEnough) {
  BufferPool pool(1 << 20);
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{5000}}) {
    auto buffer = pool.Take(size);
    ASSERT_TRUE(buffer.ok());
    EXPECT_GE(buffer->capacity(), RoundUpToBlock(size));
    EXPECT_GT(buffer->capacity(), 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer->data()) % kBlockSize, 0u);
    EXPECT_EQ(buffer->size(), 0u);
  }
}

TEST(BufferPoolTest, ReusesAReturnedBufferOfAFittingSize) {
  BufferPool pool(1 << 20);
  auto first = pool.Take(10000);
  ASSERT_TRUE(first.ok());
  const char* memory = first->data();
  first->set_size(10000);
  pool.Give(*std::move(first));
  EXPECT_EQ(pool.pooled_bytes(), RoundUpToBlock(10000));
  auto again = pool.Take(9000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), memory);
  EXPECT_EQ(again->size(), 0u);
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  // A much smaller request does not take a big buffer.
  pool.Give(*std::move(again));
  auto small = pool.Take(100);
  ASSERT_TRUE(small.ok());
  EXPECT_NE(small->data(), memory);
}

TEST(BufferPoolTest, KeepsNoMoreThanItsCap) {
  BufferPool pool(3 * kBlockSize);
  for (int i = 0; i < 5; ++i) {
    auto buffer = pool.Take(kBlockSize);
    ASSERT_TRUE(buffer.ok());
    pool.Give(*std::move(buffer));
  }
  std::vector<AlignedBuffer> held;
  for (int i = 0; i < 5; ++i) held.push_back(*pool.Take(kBlockSize));
  for (auto& buffer : held) pool.Give(std::move(buffer));
  EXPECT_EQ(pool.pooled_bytes(), 3 * kBlockSize);
}

}  // namespace
}  // namespace ckptfs::storage
