// MemoryBudget: reservations up to the limit, waiting for room, EAGAIN after
// the timeout, release on destruction, and a lone oversized request.
#include "server/storage/memory_budget.h"

#include <cerrno>
#include <thread>

#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs::storage {
namespace {

TEST(MemoryBudgetTest, ReservesUpToTheLimitThenRefusesAfterTheTimeout) {
  MemoryBudget budget(100);
  auto first = budget.Reserve(60, absl::ZeroDuration());
  ASSERT_TRUE(first.ok());
  auto second = budget.Reserve(40, absl::ZeroDuration());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(budget.reserved(), 100u);
  auto third = budget.Reserve(1, absl::Milliseconds(20));
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(ErrnoFromStatus(third.status()), EAGAIN);
  EXPECT_TRUE(budget.Reserve(0, absl::ZeroDuration()).ok());  // nothing to hold
}

TEST(MemoryBudgetTest, ReleasingLetsAWaiterIn) {
  MemoryBudget budget(100);
  auto held = budget.Reserve(100, absl::ZeroDuration());
  ASSERT_TRUE(held.ok());
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    *held = MemoryBudget::Reservation();  // releases the 100 bytes
  });
  auto waiter = budget.Reserve(70, absl::Seconds(10));
  releaser.join();
  ASSERT_TRUE(waiter.ok()) << waiter.status();
  EXPECT_EQ(budget.reserved(), 70u);
  waiter = MemoryBudget::Reservation();
  EXPECT_EQ(budget.reserved(), 0u);
}

TEST(MemoryBudgetTest, AnOversizedRequestIsAdmittedAlone) {
  MemoryBudget budget(100);
  {
    auto big = budget.Reserve(1000, absl::ZeroDuration());
    ASSERT_TRUE(big.ok());
    EXPECT_EQ(budget.reserved(), 1000u);
    EXPECT_FALSE(budget.Reserve(1, absl::Milliseconds(10)).ok());
  }
  EXPECT_EQ(budget.reserved(), 0u);
}

TEST(MemoryBudgetTest, CloseWakesWaitersAndRefusesLaterReservations) {
  MemoryBudget budget(10);
  auto held = budget.Reserve(10, absl::ZeroDuration());
  ASSERT_TRUE(held.ok());
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    budget.Close();
  });
  const absl::Time start = absl::Now();
  auto waiter = budget.Reserve(5, absl::Seconds(30));
  closer.join();
  ASSERT_FALSE(waiter.ok());
  EXPECT_EQ(ErrnoFromStatus(waiter.status()), ECANCELED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_FALSE(budget.Reserve(1, absl::ZeroDuration()).ok());
}

}  // namespace
}  // namespace ckptfs::storage
