// LogLimiter: a burst of lines goes through, then the rest are held back and
// counted, and the count rides on the next line let through.
#include "common/log_limiter.h"

#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ckptfs {
namespace {

TEST(LogLimiterTest, BurstThenHeldBackAndCounted) {
  LogLimiter limiter(absl::Milliseconds(200), /*burst=*/3);
  std::string held_back = "unchanged";
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.Allow(&held_back)) << i;
    EXPECT_EQ(held_back, "");
  }
  // Far fewer than a token's worth of time passes between these calls.
  int refused = 0;
  for (int i = 0; i < 5; ++i) refused += limiter.Allow(&held_back) ? 0 : 1;
  EXPECT_GE(refused, 4);
  absl::SleepFor(absl::Milliseconds(250));  // a token comes back (at least)
  ASSERT_TRUE(limiter.Allow(&held_back));
  EXPECT_NE(held_back.find("more like it not logged"), std::string::npos) << held_back;
  ASSERT_FALSE(held_back.empty());
}

}  // namespace
}  // namespace ckptfs
