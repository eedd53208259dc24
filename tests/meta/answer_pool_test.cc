// AnswerPool: every index runs exactly once, the pool's threads take part,
// small jobs and a second concurrent caller run on the caller's thread.
#include "server/meta/checkpoint/answer_pool.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ckptfs::meta {
namespace {

std::unique_ptr<std::atomic<int>[]> Counters(size_t n) {
  auto counters = std::make_unique<std::atomic<int>[]>(n);
  for (size_t i = 0; i < n; ++i) counters[i] = 0;
  return counters;
}

TEST(AnswerPoolTest, EveryIndexRunsOnce) {
  AnswerPool pool(3);
  for (size_t n : {0, 1, 31, 32, 33, 512, 4096}) {
    auto counters = Counters(n);
    pool.ForEach(n, [&](size_t i) { counters[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(counters[i].load(), 1) << "n " << n << " i " << i;
  }
}

TEST(AnswerPoolTest, PoolThreadsTakePart) {
  // The caller blocks in its first index until another thread ran one: only
  // the pool's threads can take the rest.
  AnswerPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  absl::Notification helped;
  std::atomic<bool> notifying{false};  // two pool threads may get here at once
  std::atomic<int> ran{0};
  pool.ForEach(256, [&](size_t i) {
    ran.fetch_add(1);
    if (std::this_thread::get_id() != caller) {
      if (!notifying.exchange(true)) helped.Notify();
    } else if (i == 0) {
      EXPECT_TRUE(helped.WaitForNotificationWithTimeout(absl::Seconds(60)));
    }
  });
  EXPECT_TRUE(helped.HasBeenNotified());
  EXPECT_EQ(ran.load(), 256);
}

TEST(AnswerPoolTest, SmallJobsRunOnTheCaller) {
  AnswerPool pool(3);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  pool.ForEach(AnswerPool::kMinParallel - 1, [&](size_t) {
    if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
  });
  EXPECT_EQ(elsewhere.load(), 0);
}

TEST(AnswerPoolTest, NoThreadsRunsOnTheCaller) {
  AnswerPool pool(0);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  std::atomic<int> ran{0};
  pool.ForEach(1000, [&](size_t) {
    ran.fetch_add(1);
    if (std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
  });
  EXPECT_EQ(ran.load(), 1000);
  EXPECT_EQ(elsewhere.load(), 0);
}

TEST(AnswerPoolTest, ASecondCallerWhileBusyRunsAlone) {
  // The first job holds the pool until the second, started meanwhile from
  // another thread, has finished all of its indices.
  AnswerPool pool(2);
  absl::Notification first_started;
  absl::Notification second_done;
  auto first = Counters(64);
  auto second = Counters(64);
  std::thread other([&] {
    first_started.WaitForNotification();
    const std::thread::id me = std::this_thread::get_id();
    std::atomic<int> elsewhere{0};
    pool.ForEach(64, [&](size_t i) {
      second[i].fetch_add(1);
      if (std::this_thread::get_id() != me) elsewhere.fetch_add(1);
    });
    EXPECT_EQ(elsewhere.load(), 0);
    second_done.Notify();
  });
  pool.ForEach(64, [&](size_t i) {
    first[i].fetch_add(1);
    if (i == 0) {
      first_started.Notify();
      EXPECT_TRUE(second_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
    }
  });
  other.join();
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(first[i].load(), 1);
    EXPECT_EQ(second[i].load(), 1);
  }
}

}  // namespace
}  // namespace ckptfs::meta
