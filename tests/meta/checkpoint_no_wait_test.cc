// no_wait arrivals at the CheckpointCoordinator (CommitCheckpointRequest.
// no_wait, what a client sends for its ranks other than the one holding the
// long poll): answered before CommitNoWait returns, PENDING while the
// barrier or its commit runs, counted into the barrier like any arrival (the
// last one completes it and the commit still runs), the final state of an
// ended checkpoint, and a bad rank's EINVAL.
#include <cerrno>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/meta/checkpoint_test_util.h"

namespace ckptfs::meta {
namespace {

template <typename Condition>
bool Eventually(Condition condition) {
  for (int i = 0; i < 6000; ++i) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return condition();
}

class CheckpointNoWaitTest : public CheckpointFixture {
 protected:
  std::string LatestOf(uint64_t run) {
    auto latest = ns_->Lookup(run, "latest");
    if (!latest.ok()) return "<none>";
    auto target = ns_->ReadLink(latest->ino());
    return target.ok() ? *target : "<not a symlink>";
  }
};

TEST_F(CheckpointNoWaitTest, AnswersPendingAtOnceAndTheLastArrivalCompletesTheBarrier) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "step-1");
  ASSERT_OK(Declare(ckpt, 3));
  File(ckpt, "model.pt");
  auto poll = StartCommit(ckpt, 0);  // the client's long poll
  auto rank1 = StartCommitNoWait(ckpt, 1);
  ASSERT_TRUE(rank1->done.HasBeenNotified());  // before CommitNoWait returned
  ASSERT_TRUE(rank1->result.ok()) << rank1->result.status();
  EXPECT_EQ(rank1->result->state(), PENDING);
  EXPECT_EQ(rank1->result->arrived(), 2u);
  EXPECT_EQ(rank1->result->ranks(), 3u);
  // Repeated: counted once.
  auto again = StartCommitNoWait(ckpt, 1);
  ASSERT_TRUE(again->done.HasBeenNotified());
  ASSERT_TRUE(again->result.ok());
  EXPECT_EQ(again->result->arrived(), 2u);
  EXPECT_FALSE(poll->done.HasBeenNotified());
  // The last arrival answers PENDING with every rank counted; the commit
  // runs on the commit worker and answers the long poll.
  auto rank2 = StartCommitNoWait(ckpt, 2);
  ASSERT_TRUE(rank2->done.HasBeenNotified());
  ASSERT_TRUE(rank2->result.ok()) << rank2->result.status();
  EXPECT_NE(rank2->result->state(), ABORTED);
  if (rank2->result->state() == PENDING) {
    EXPECT_EQ(rank2->result->arrived(), 3u);
  }
  auto outcome = poll->Wait();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->state(), COMMITTED);
  EXPECT_EQ(outcome->files(), 1u);
  EXPECT_EQ(LatestOf(run), "step-1");
  EXPECT_EQ(storage_.Count(data::SYNC, true), 1u);
  // On an ended checkpoint: its final state, at once.
  auto late = StartCommitNoWait(ckpt, 1);
  ASSERT_TRUE(late->done.HasBeenNotified());
  ASSERT_TRUE(late->result.ok()) << late->result.status();
  EXPECT_EQ(late->result->state(), COMMITTED);
  EXPECT_EQ(late->result->arrived(), 3u);
}

TEST_F(CheckpointNoWaitTest, CommitsWithNoLongPollAtAll) {
  // The first arrival creates the barrier (and loads the stored arrivals);
  // nobody waits, and the commit still runs once the last one arrives.
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  File(ckpt, "a.pt");
  auto rank0 = StartCommitNoWait(ckpt, 0);
  ASSERT_TRUE(rank0->done.HasBeenNotified());
  ASSERT_TRUE(rank0->result.ok()) << rank0->result.status();
  EXPECT_EQ(rank0->result->state(), PENDING);
  EXPECT_EQ(rank0->result->arrived(), 1u);
  EXPECT_GT(rank0->result->first_commit_ms(), 0);
  auto rank1 = StartCommitNoWait(ckpt, 1);
  ASSERT_TRUE(rank1->done.HasBeenNotified());
  ASSERT_TRUE(rank1->result.ok()) << rank1->result.status();
  EXPECT_TRUE(Eventually([&] { return ckpts_->Get(ckpt)->state() == COMMITTED; }));
}

TEST_F(CheckpointNoWaitTest, AnAbortedCheckpointAnswersItsErrnoAndReason) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  const uint64_t file = File(ckpt, "shard.pt");
  auto poll = StartCommit(ckpt, 0);
  CommitWriteRequest failed;
  failed.set_ino(file);
  failed.set_failed(true);
  ASSERT_OK(ns_->CommitWrite(failed));
  ASSERT_OK(coordinator_->WriteFailed(file));
  EXPECT_ERRNO(poll->Wait(), EIO);
  auto late = StartCommitNoWait(ckpt, 1);
  ASSERT_TRUE(late->done.HasBeenNotified());
  EXPECT_ERRNO(late->result, EIO);
  EXPECT_TRUE(absl::StrContains(late->result.status().message(), "failed"))
      << late->result.status();
}

TEST_F(CheckpointNoWaitTest, ABadRankIsEinvalAndRecordsNothing) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  auto bad = StartCommitNoWait(ckpt, 2);
  ASSERT_TRUE(bad->done.HasBeenNotified());
  EXPECT_ERRNO(bad->result, EINVAL);
  EXPECT_ERRNO(StartCommitNoWait(Dir(kRootIno, "plain"), 0)->result, EINVAL);
  EXPECT_EQ(ckpts_->Get(ckpt)->arrived(), 0u);
  EXPECT_EQ(ckpts_->Get(ckpt)->first_commit_ms(), 0);
  // The others are not affected.
  auto poll = StartCommit(ckpt, 0);
  ASSERT_TRUE(StartCommitNoWait(ckpt, 1)->result.ok());
  auto outcome = poll->Wait();
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->state(), COMMITTED);
}

TEST_F(CheckpointNoWaitTest, AStoppingServiceAnswersRetry) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  coordinator_->Stop();
  auto arrival = StartCommitNoWait(ckpt, 0);
  ASSERT_TRUE(arrival->done.HasBeenNotified());
  EXPECT_TRUE(IsServiceStoppingError(arrival->result.status())) << arrival->result.status();
}

}  // namespace
}  // namespace ckptfs::meta
