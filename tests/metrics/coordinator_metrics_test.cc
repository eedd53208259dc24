// The commit barrier's metrics (server/meta/checkpoint/coordinator.h) on an
// in-process coordinator (tests/meta's CheckpointFixture): the scrape-time
// gauges while ranks wait, and the committed/aborted counters and the commit
// latency histogram after. The registry is the process-wide one, so every
// check is a difference from before the test's own checkpoint.
#include <cerrno>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "common/metrics/metrics.h"
#include "gtest/gtest.h"
#include "tests/meta/checkpoint_test_util.h"
#include "tests/metrics/exposition_parser.h"

namespace ckptfs::meta {
namespace {

class CoordinatorMetricsTest : public CheckpointFixture {
 protected:
  static testing::Exposition Scrape() {
    absl::StatusOr<testing::Exposition> e =
        testing::ParseExposition(metrics::Registry::Default().Render());
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : testing::Exposition();
  }
  static double Value(const testing::Exposition& e, const std::string& name) {
    const testing::Sample* s = e.Find(name);
    return s == nullptr ? -1 : s->value;
  }
};

TEST_F(CoordinatorMetricsTest, BarrierGaugesCountersAndCommitLatency) {
  const testing::Exposition before = Scrape();
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "step-1");
  ASSERT_OK(Declare(ckpt, 3));
  File(ckpt, "a.pt");
  auto rank0 = StartCommit(ckpt, 0);
  auto rank1 = StartCommit(ckpt, 1);
  // Both arrivals are recorded before Commit returns; they wait at the
  // barrier for rank 2.
  const testing::Exposition waiting = Scrape();
  EXPECT_EQ(Value(waiting, "ckptfs_meta_checkpoint_barriers_open"), 1);
  EXPECT_EQ(Value(waiting, "ckptfs_meta_checkpoint_ranks_arrived"), 2);
  EXPECT_EQ(Value(waiting, "ckptfs_meta_checkpoint_waiting_commits"), 2);

  auto rank2 = StartCommit(ckpt, 2);
  for (auto* call : {&rank0, &rank1, &rank2}) {
    auto info = (*call)->Wait();
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->state(), COMMITTED);
  }
  // The commit latency is recorded once the last waiter has been answered,
  // which may be just after our Wait returned: poll (bounded) for it.
  testing::Exposition after = Scrape();
  for (absl::Time deadline = absl::Now() + absl::Seconds(10);
       Value(after, "ckptfs_meta_checkpoint_commit_seconds_count") ==
           Value(before, "ckptfs_meta_checkpoint_commit_seconds_count") &&
       absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(10));
    after = Scrape();
  }
  EXPECT_EQ(Value(after, "ckptfs_meta_checkpoints_committed_total") -
                Value(before, "ckptfs_meta_checkpoints_committed_total"),
            1);
  EXPECT_EQ(Value(after, "ckptfs_meta_checkpoint_commit_seconds_count") -
                Value(before, "ckptfs_meta_checkpoint_commit_seconds_count"),
            1);
  EXPECT_EQ(Value(after, "ckptfs_meta_checkpoint_barriers_open"), 0);
  EXPECT_EQ(Value(after, "ckptfs_meta_checkpoint_waiting_commits"), 0);
}

TEST_F(CoordinatorMetricsTest, TimeoutCountsAnAbort) {
  const testing::Exposition before = Scrape();
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "late");
  ASSERT_OK(Declare(ckpt, 2, /*timeout_s=*/5));
  auto rank0 = StartCommit(ckpt, 0);
  clock_.Advance(absl::Seconds(6));
  coordinator_->RunTimers();
  EXPECT_ERRNO(rank0->Wait(), ETIMEDOUT);
  const testing::Exposition after = Scrape();
  EXPECT_EQ(Value(after, "ckptfs_meta_checkpoints_aborted_total") -
                Value(before, "ckptfs_meta_checkpoints_aborted_total"),
            1);
  EXPECT_EQ(Value(after, "ckptfs_meta_checkpoints_committed_total"),
            Value(before, "ckptfs_meta_checkpoints_committed_total"));
}

}  // namespace
}  // namespace ckptfs::meta
