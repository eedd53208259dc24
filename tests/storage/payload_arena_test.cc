// PayloadArena: aligned leases carved from one region, memory returned and
// merged, FIFO waiting when the region is full, cancellation, and the
// registered-region view.
#include "server/storage/payload_arena.h"

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ckptfs::storage {
namespace {

std::unique_ptr<PayloadArena> MakePool(size_t bytes) {
  auto pool = PayloadArena::Create(bytes);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *std::move(pool) : nullptr;
}

TEST(PayloadArenaTest, LeasesAreAlignedWithinTheRegionAndDisjoint) {
  auto pool = MakePool(1 << 20);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->capacity(), size_t{1} << 20);
  std::vector<PayloadArena::Lease> leases;
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{5000}, size_t{100000}}) {
    auto lease = pool->TryTake(size);
    ASSERT_TRUE(lease.has_value()) << size;
    EXPECT_EQ(lease->size(), RoundUpToBlock(std::max<size_t>(size, 1)));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(lease->data()) % kBlockSize, 0u);
    std::memset(lease->data(), static_cast<int>(leases.size()), lease->size());
    leases.push_back(*std::move(lease));
  }
  // Each kept its own bytes: no two overlap.
  for (size_t i = 0; i < leases.size(); ++i) {
    for (size_t j = 0; j < leases[i].size(); ++j) {
      ASSERT_EQ(leases[i].data()[j], static_cast<char>(i)) << "lease " << i << " byte " << j;
    }
  }
  const auto regions = pool->regions();
  ASSERT_EQ(regions.size(), 1u);
  for (const auto& lease : leases) {
    EXPECT_GE(lease.data(), static_cast<char*>(regions[0].iov_base));
    EXPECT_LE(lease.data() + lease.size(),
              static_cast<char*>(regions[0].iov_base) + regions[0].iov_len);
  }
  EXPECT_EQ(pool->stats().leases, leases.size());
}

TEST(PayloadArenaTest, ReturnedMemoryMergesBackIntoOneExtent) {
  auto pool = MakePool(64 * kBlockSize);
  ASSERT_NE(pool, nullptr);
  std::vector<PayloadArena::Lease> leases;
  for (int i = 0; i < 8; ++i) leases.push_back(*pool->TryTake(8 * kBlockSize));
  EXPECT_FALSE(pool->TryTake(1).has_value());  // full
  EXPECT_EQ(pool->stats().in_use, pool->capacity());
  // Return them out of order; the whole region must become one extent again.
  for (int i : {3, 0, 7, 5, 1, 6, 2, 4}) leases[i].Return();
  EXPECT_EQ(pool->stats().in_use, 0u);
  EXPECT_EQ(pool->stats().leases, 0u);
  EXPECT_EQ(pool->stats().peak_in_use, pool->capacity());
  auto whole = pool->TryTake(pool->capacity());
  EXPECT_TRUE(whole.has_value());
}

TEST(PayloadArenaTest, RequestsLargerThanTheRegionAreNeverGrantedByTryTake) {
  auto pool = MakePool(4 * kBlockSize);
  ASSERT_NE(pool, nullptr);
  EXPECT_FALSE(pool->TryTake(4 * kBlockSize + 1).has_value());
  EXPECT_TRUE(pool->TryTake(4 * kBlockSize).has_value());
}

TEST(PayloadArenaTest, WaitersAreGrantedInOrderWhenMemoryComesBack) {
  auto pool = MakePool(4 * kBlockSize);
  ASSERT_NE(pool, nullptr);
  auto all = pool->TryTake(4 * kBlockSize);
  ASSERT_TRUE(all.has_value());
  std::vector<int> order;
  std::vector<PayloadArena::Lease> granted;
  auto big = pool->TakeOrWait(3 * kBlockSize, [&](PayloadArena::Lease lease) {
    order.push_back(1);
    granted.push_back(std::move(lease));
  });
  EXPECT_FALSE(big.first.has_value());
  EXPECT_NE(big.second, 0u);
  auto small = pool->TakeOrWait(kBlockSize, [&](PayloadArena::Lease lease) {
    order.push_back(2);
    granted.push_back(std::move(lease));
  });
  EXPECT_FALSE(small.first.has_value());
  // A small request does not pass the waiting large one, even though it
  // would fit somewhere a little later.
  EXPECT_FALSE(pool->TryTake(kBlockSize).has_value());
  EXPECT_EQ(pool->stats().waiting, 2u);
  EXPECT_EQ(pool->stats().waits, 2u);
  all->Return();
  ASSERT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(granted[0].size(), 3 * kBlockSize);
  EXPECT_EQ(granted[1].size(), kBlockSize);
  EXPECT_EQ(pool->stats().waiting, 0u);
  EXPECT_EQ(pool->stats().in_use, pool->capacity());
  granted.clear();
  EXPECT_EQ(pool->stats().in_use, 0u);
}

TEST(PayloadArenaTest, CancelWithdrawsAWaiterAndUnblocksThoseBehindIt) {
  auto pool = MakePool(4 * kBlockSize);
  ASSERT_NE(pool, nullptr);
  auto three = pool->TryTake(3 * kBlockSize);
  ASSERT_TRUE(three.has_value());
  bool big_granted = false;
  auto big = pool->TakeOrWait(2 * kBlockSize, [&](PayloadArena::Lease) { big_granted = true; });
  ASSERT_NE(big.second, 0u);
  std::optional<PayloadArena::Lease> small_lease;
  auto small = pool->TakeOrWait(kBlockSize,
                                [&](PayloadArena::Lease lease) { small_lease = std::move(lease); });
  ASSERT_NE(small.second, 0u);  // queued behind the big one, though a block is free
  EXPECT_TRUE(pool->Cancel(big.second));
  EXPECT_FALSE(big_granted);
  ASSERT_TRUE(small_lease.has_value());      // the free block went to the next waiter
  EXPECT_FALSE(pool->Cancel(small.second));  // already granted
  EXPECT_FALSE(pool->Cancel(12345));
}

TEST(PayloadArenaTest, ManyThreadsTakingAndReturningNeverOverlapOrLeak) {
  auto pool = MakePool(16 * kBlockSize);
  ASSERT_NE(pool, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const size_t size = static_cast<size_t>(1 + (i * 7 + t) % 5) * kBlockSize;
        auto lease = pool->TryTake(size);
        if (!lease.has_value()) continue;
        std::memset(lease->data(), t + 1, lease->size());
        for (size_t j = 0; j < lease->size(); j += 512) {
          if (lease->data()[j] != static_cast<char>(t + 1)) ++bad;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(pool->stats().in_use, 0u);
  EXPECT_TRUE(pool->TryTake(pool->capacity()).has_value());
}

}  // namespace
}  // namespace ckptfs::storage
