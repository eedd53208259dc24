// Commit coalescing (client/commit_coalescer.h) through one Client over the
// metadata service in-process, its calls counted by RecordingMetaClient
// (long polls and no_wait arrivals): the ranks committing a checkpoint
// through one client hold one long poll between them, a bad rank's error
// stays its own, a cancelled poller hands the poll to a waiting rank, a
// cancelled waiting rank returns EINTR without waiting for the poll, and a
// checkpoint's group goes with its last rank.
#include <atomic>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cancellation.h"
#include "client/commit_coalescer.h"
#include "common/errno_status.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

class CommitCoalescerTest : public ClientFixture {
 protected:
  void SetUp() override {
    ClientOptions options = DefaultOptions();
    // No poll runs out during a test: every long poll counted is a rank's
    // first or one taken over.
    options.commit_poll = absl::Minutes(10);
    MakeClient(options);
  }

  uint64_t Checkpoint(const std::string& name, uint32_t ranks) {
    auto dir = client_->Mkdir(kRootIno, name, 0755, 0, 0);
    EXPECT_TRUE(dir.ok()) << dir.status();
    if (!dir.ok()) return 0;
    EXPECT_TRUE(client_->DeclareCheckpoint(dir->ino(), ranks).ok());
    return dir->ino();
  }

  testing::RecordingMetaClient::CommitCounts Counts() { return meta_->CommitCheckpointCounts(); }

  // The ranks of checkpoint `dir` whose commit the service has recorded.
  uint32_t Arrived(uint64_t dir) {
    auto info = service_->Checkpoint(dir);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->arrived() : 0;
  }

  // Until `n` no_wait arrivals were answered.
  void WaitForArrivals(int n) {
    while (Counts().no_wait < n) absl::SleepFor(absl::Milliseconds(1));
  }
  // Until `n` long polls of checkpoint `dir` were sent and the service has
  // recorded a rank of it (the first poll's).
  void WaitForPoll(uint64_t dir, int n) {
    while (Counts().long_polls < n || Arrived(dir) < 1) absl::SleepFor(absl::Milliseconds(1));
  }
};

TEST_F(CommitCoalescerTest, EightRanksOfOneClientHoldOneLongPoll) {
  constexpr uint32_t kRanks = 8;
  const uint64_t dir = Checkpoint("step-1", kRanks);
  std::vector<absl::StatusOr<meta::CheckpointInfo>> results(kRanks);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] { results[rank] = client_->CommitCheckpoint(dir, rank); });
  }
  for (std::thread& thread : ranks) thread.join();
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << rank << ": " << results[rank].status();
    EXPECT_EQ(results[rank]->state(), meta::COMMITTED) << rank;
  }
  const testing::RecordingMetaClient::CommitCounts counts = Counts();
  EXPECT_EQ(counts.long_polls, 1);
  EXPECT_EQ(counts.long_polls_peak, 1);
  EXPECT_EQ(counts.no_wait, static_cast<int>(kRanks) - 1);
  EXPECT_EQ(meta_->Calls("CommitCheckpoint"), static_cast<int>(kRanks));
  // A later commit of a rank answers from the service again.
  auto again = client_->CommitCheckpoint(dir, 3);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state(), meta::COMMITTED);
}

TEST_F(CommitCoalescerTest, ABadRankFailsAloneAndTheOthersCommit) {
  // Nine threads at once, one of them with a rank the checkpoint does not
  // have: whether it polls or arrives, its EINVAL is its own.
  constexpr uint32_t kRanks = 8;
  const uint64_t dir = Checkpoint("step-1", kRanks);
  std::vector<absl::StatusOr<meta::CheckpointInfo>> results(kRanks + 1);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank <= kRanks; ++rank) {
    ranks.emplace_back([&, rank] { results[rank] = client_->CommitCheckpoint(dir, rank); });
  }
  for (std::thread& thread : ranks) thread.join();
  EXPECT_EQ(ErrnoFromStatus(results[kRanks].status()), EINVAL) << results[kRanks].status();
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << rank << ": " << results[rank].status();
    EXPECT_EQ(results[rank]->state(), meta::COMMITTED) << rank;
  }
  EXPECT_EQ(Counts().long_polls_peak, 1);
}

TEST_F(CommitCoalescerTest, ABadRankArrivingBesideThePollFailsAlone) {
  const uint64_t dir = Checkpoint("step-1", 2);
  absl::StatusOr<meta::CheckpointInfo> rank0;
  std::thread poller([&] { rank0 = client_->CommitCheckpoint(dir, 0); });
  WaitForPoll(dir, 1);
  EXPECT_EQ(ErrnoFromStatus(client_->CommitCheckpoint(dir, 5).status()), EINVAL);
  auto rank1 = client_->CommitCheckpoint(dir, 1);
  poller.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ(rank0->state(), meta::COMMITTED);
  EXPECT_EQ(rank1->state(), meta::COMMITTED);
  EXPECT_EQ(Counts().long_polls, 1);
}

TEST_F(CommitCoalescerTest, ACancelledPollerGetsEintrAndAWaitingRankTakesOver) {
  const uint64_t dir = Checkpoint("step-1", 3);
  Cancellation cancel0;
  absl::Status rank0;
  std::thread poller([&] { rank0 = client_->CommitCheckpoint(dir, 0, &cancel0).status(); });
  WaitForPoll(dir, 1);
  absl::StatusOr<meta::CheckpointInfo> rank1;
  std::thread waiter([&] { rank1 = client_->CommitCheckpoint(dir, 1); });
  WaitForArrivals(1);  // rank 1 arrived and waits on rank 0's poll
  cancel0.Cancel();
  poller.join();
  EXPECT_EQ(ErrnoFromStatus(rank0), EINTR) << rank0;
  // Rank 1 now holds the poll, and still gets the outcome.
  WaitForPoll(dir, 2);
  auto rank2 = client_->CommitCheckpoint(dir, 2);
  waiter.join();
  ASSERT_TRUE(rank2.ok()) << rank2.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ(rank1->state(), meta::COMMITTED);
  EXPECT_EQ(rank2->state(), meta::COMMITTED);
  const testing::RecordingMetaClient::CommitCounts counts = Counts();
  EXPECT_EQ(counts.long_polls, 2);
  EXPECT_EQ(counts.long_polls_peak, 1);
}

TEST_F(CommitCoalescerTest, ACancelledWaitingRankGetsEintrWithoutWaitingForThePoll) {
  const uint64_t dir = Checkpoint("step-1", 3);
  std::atomic<bool> rank0_returned{false};
  absl::StatusOr<meta::CheckpointInfo> rank0;
  std::thread poller([&] {
    rank0 = client_->CommitCheckpoint(dir, 0);
    rank0_returned = true;
  });
  WaitForPoll(dir, 1);
  Cancellation cancel1;
  absl::Status rank1;
  std::thread waiter([&] { rank1 = client_->CommitCheckpoint(dir, 1, &cancel1).status(); });
  WaitForArrivals(1);
  cancel1.Cancel();
  // The poll lasts ten minutes: a waiter that missed the cancel would hang
  // the test until its timeout.
  waiter.join();
  EXPECT_EQ(ErrnoFromStatus(rank1), EINTR) << rank1;
  EXPECT_FALSE(rank0_returned.load());
  EXPECT_EQ(Counts().long_polls, 1);  // the waiter never polled
  // Committing again waits for the same outcome.
  absl::StatusOr<meta::CheckpointInfo> retried;
  std::thread again([&] { retried = client_->CommitCheckpoint(dir, 1); });
  auto rank2 = client_->CommitCheckpoint(dir, 2);
  again.join();
  poller.join();
  for (const auto* result : {&rank0, &retried, &rank2}) {
    ASSERT_TRUE(result->ok()) << result->status();
    EXPECT_EQ((*result)->state(), meta::COMMITTED);
  }
  EXPECT_EQ(Counts().long_polls_peak, 1);
}

TEST_F(CommitCoalescerTest, TwoCheckpointsPollSeparately) {
  // Two checkpoints committed at once through one client: one poll each.
  const uint64_t a = Checkpoint("a", 2);
  const uint64_t b = Checkpoint("b", 2);
  absl::StatusOr<meta::CheckpointInfo> a0, b0;
  std::thread pa([&] { a0 = client_->CommitCheckpoint(a, 0); });
  std::thread pb([&] { b0 = client_->CommitCheckpoint(b, 0); });
  while (Counts().long_polls < 2 || Arrived(a) < 1 || Arrived(b) < 1) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(Counts().long_polls_peak, 2);
  ASSERT_TRUE(client_->CommitCheckpoint(a, 1).ok());
  ASSERT_TRUE(client_->CommitCheckpoint(b, 1).ok());
  pa.join();
  pb.join();
  ASSERT_TRUE(a0.ok()) << a0.status();
  ASSERT_TRUE(b0.ok()) << b0.status();
  EXPECT_EQ(a0->state(), meta::COMMITTED);
  EXPECT_EQ(b0->state(), meta::COMMITTED);
}

// The coalescer alone over a client of the service: a checkpoint's group
// lives while a rank of it is in Round.
TEST(CommitCoalescerGroupsTest, AGroupIsDroppedWhenItsLastRankLeaves) {
  auto service = testing::InProcessMetaService::Start(testing::InProcessMetaService::Options());
  ASSERT_TRUE(service.ok()) << service.status();
  std::unique_ptr<MetaClient> meta = (*service)->NewClient();
  meta::MkdirRequest mkdir;
  mkdir.set_parent(kRootIno);
  mkdir.set_name("step");
  mkdir.set_mode(0755);
  auto dir = meta->Mkdir(mkdir);
  ASSERT_TRUE(dir.ok()) << dir.status();
  const uint64_t ino = dir->attr().ino();
  meta::DeclareCheckpointRequest declare;
  declare.set_ino(ino);
  declare.set_ranks(2);
  ASSERT_TRUE(meta->DeclareCheckpoint(declare).ok());
  CommitCoalescer coalescer(meta.get());
  EXPECT_EQ(coalescer.ActiveCheckpoints(), 0u);
  absl::StatusOr<meta::CheckpointInfo> rank0;
  std::thread poller([&] {
    bool arrived = false;
    rank0 = coalescer.Round(ino, 0, 600000, &arrived, nullptr);
    EXPECT_TRUE(arrived);
  });
  while ((*service)->Checkpoint(ino)->arrived() < 1) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(coalescer.ActiveCheckpoints(), 1u);
  bool arrived = false;
  auto rank1 = coalescer.Round(ino, 1, 600000, &arrived, nullptr);
  poller.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ(rank0->state(), meta::COMMITTED);
  EXPECT_EQ(rank1->state(), meta::COMMITTED);
  EXPECT_EQ(coalescer.ActiveCheckpoints(), 0u);
}

}  // namespace
}  // namespace ckptfs::client
