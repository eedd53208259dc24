// The commit barrier across metadata servers, in one process: two
// "servers" (each its own Namespace, CheckpointStore, Committer and
// CheckpointCoordinator with a shared_poll) over one MemoryKvStore, the way
// two ckptfs-meta --etcd_shared share etcd. Ranks commit through either:
//   - half through each: the checkpoint commits once and every waiter, on
//     both servers, gets COMMITTED (one commit: one ended_ms);
//   - ranks arriving only through one server while the other holds the
//     waiters: the waiters learn the outcome from the store;
//   - a rank missing: both servers' waiters get ETIMEDOUT, and the reason
//     counts the arrivals of both servers and names the missing rank;
//   - a rank committing again through the other server (a retry after its
//     server died) counts once;
//   - the server that loses the commit race (its commit held back, as by a
//     slow SYNC, until the other committed) neither counts the commit nor
//     applies retention (which would take its checkpoint as the newest);
//   - of two commit (or abort) transactions of one checkpoint, only one
//     reports that it applied.
// The CheckpointCoordinator's poll thread runs for real (a few ms each).
#include <cerrno>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/reserved_xattrs.h"
#include "gtest/gtest.h"
#include "proto/meta.pb.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/checkpoint/committer.h"
#include "server/meta/checkpoint/coordinator.h"
#include "server/meta/clock.h"
#include "server/meta/keys.h"
#include "server/meta/membership.h"
#include "server/meta/memory_kv_store.h"
#include "server/meta/namespace.h"

namespace ckptfs::meta {
namespace {

using Result = absl::StatusOr<CheckpointInfo>;

// A Committer that records what each run ended, and that holds the runs
// back while `held` (as a slow SYNC of the storage servers would).
class RecordingCommitter : public Committer {
 public:
  using Committer::Committer;
  absl::StatusOr<CheckpointStore::Ended> Run(uint64_t ino) override {
    {
      absl::MutexLock lock(&mu_);
      ++entered_;
      auto released = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !held_; };
      mu_.Await(absl::Condition(&released));
    }
    absl::StatusOr<CheckpointStore::Ended> ended = Committer::Run(ino);
    absl::MutexLock lock(&mu_);
    if (ended.ok() && ended->applied) ++applied_;
    return ended;
  }
  void Hold() {
    absl::MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }
  // Waits (at most 30 s) until a run has been entered; whether one was.
  bool AwaitEntered() {
    absl::MutexLock lock(&mu_);
    auto entered = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return entered_ > 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&entered), absl::Seconds(30));
  }
  int applied() {
    absl::MutexLock lock(&mu_);
    return applied_;
  }
  // Waits (at most 30 s) until `n` runs applied; how many did. (The store
  // shows a checkpoint ended as soon as the run's Txn applied, a moment
  // before the run returns and is counted here.)
  int AwaitApplied(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return applied_ >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(30));
    return applied_;
  }

 private:
  absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  int applied_ ABSL_GUARDED_BY(mu_) = 0;
};

// One metadata server's part on the shared store.
struct Server {
  explicit Server(KvStore* kv) {
    membership = std::make_unique<Membership>(kv, Clock::Real(), Membership::Options{});
    ns = std::make_unique<Namespace>(kv, membership.get(), Clock::Real(), Namespace::Options{});
    store = std::make_unique<CheckpointStore>(kv, &ns->inodes(), Clock::Real(),
                                              CheckpointStore::Options{});
    committer =
        std::make_unique<RecordingCommitter>(store.get(), membership.get(), Committer::Options{});
    CheckpointCoordinator::Options options;
    options.shared_poll = absl::Milliseconds(20);
    coordinator = std::make_unique<CheckpointCoordinator>(store.get(), committer.get(),
                                                          Clock::Real(), options);
  }
  std::unique_ptr<Membership> membership;
  std::unique_ptr<Namespace> ns;
  std::unique_ptr<CheckpointStore> store;
  std::unique_ptr<RecordingCommitter> committer;
  std::unique_ptr<CheckpointCoordinator> coordinator;
};

class SharedBarrierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    x_ = std::make_unique<Server>(&kv_);
    y_ = std::make_unique<Server>(&kv_);
    ASSERT_TRUE(x_->ns->Init().ok());
    ASSERT_TRUE(y_->ns->Init().ok());
    ASSERT_TRUE(x_->coordinator->Start().ok());
    ASSERT_TRUE(y_->coordinator->Start().ok());
  }
  void TearDown() override {
    if (x_) x_->coordinator->Stop();
    if (y_) y_->coordinator->Stop();
  }

  // A checkpoint directory `name` of `ranks` ranks (timeout_s 0: default),
  // in directory `parent`.
  uint64_t Declare(const std::string& name, uint32_t ranks, uint32_t timeout_s = 0,
                   uint64_t parent = kRootIno) {
    MkdirRequest mkdir;
    mkdir.set_parent(parent);
    mkdir.set_name(name);
    mkdir.set_mode(0755);
    absl::StatusOr<Attr> dir = x_->ns->Mkdir(mkdir);
    EXPECT_TRUE(dir.ok()) << dir.status();
    if (!dir.ok()) return 0;
    DeclareCheckpointRequest declare;
    declare.set_ino(dir->ino());
    declare.set_ranks(ranks);
    declare.set_timeout_s(timeout_s);
    absl::StatusOr<CheckpointInfo> info = y_->coordinator->Declare(declare);
    EXPECT_TRUE(info.ok()) << info.status();
    return dir->ino();
  }

  // Rank `rank` commits through `server`, long-polling until the
  // checkpoint ends (or 30 s pass: a hang, reported as such).
  static Result Commit(Server& server, uint64_t ino, uint32_t rank) {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up) {
      auto promise = std::make_shared<std::promise<Result>>();
      std::future<Result> answer = promise->get_future();
      server.coordinator->Commit(ino, rank, 2000,
                                 [promise](Result result) { promise->set_value(result); });
      Result result = answer.get();
      if (!result.ok() || result->state() != PENDING) return result;
    }
    return absl::DeadlineExceededError("no outcome within 30 s");
  }

  // Rank `rank` commits through `server` without waiting.
  static Result ArriveNoWait(Server& server, uint64_t ino, uint32_t rank) {
    std::promise<Result> promise;
    server.coordinator->CommitNoWait(ino, rank, [&](Result r) { promise.set_value(r); });
    return promise.get_future().get();
  }

  // Waits (at most 30 s) until checkpoint `ino` is no longer PENDING.
  CheckpointState AwaitEnded(uint64_t ino) {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (true) {
      absl::StatusOr<CheckpointInfo> info = x_->store->Get(ino);
      if (!info.ok()) return CHECKPOINT_STATE_UNSPECIFIED;
      if (info->state() != PENDING || absl::Now() > give_up) return info->state();
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  MemoryKvStore kv_;
  std::unique_ptr<Server> x_, y_;
};

TEST_F(SharedBarrierTest, RanksThroughBothServersCommitOnce) {
  constexpr uint32_t kRanks = 16;
  const uint64_t ino = Declare("step_1", kRanks);
  std::vector<std::future<Result>> ranks;
  for (uint32_t r = 0; r < kRanks; ++r) {
    Server& server = r % 2 == 0 ? *x_ : *y_;
    ranks.push_back(
        std::async(std::launch::async, [&server, ino, r] { return Commit(server, ino, r); }));
  }
  std::vector<Result> results;
  for (auto& rank : ranks) results.push_back(rank.get());
  for (uint32_t r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(results[r]->state(), COMMITTED) << "rank " << r;
    EXPECT_EQ(results[r]->ended_ms(), results[0]->ended_ms()) << "rank " << r;
  }
  absl::StatusOr<CheckpointInfo> info = y_->store->Get(ino);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state(), COMMITTED);
  EXPECT_EQ(info->ended_ms(), results[0]->ended_ms());
  // The arrival records go once the servers concluded (after answering:
  // polled, with a bound on a hang).
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!kv_.Scan(ArrivalPrefix(ino), "", 1).value().empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(kv_.Scan(ArrivalPrefix(ino), "", 1).value().empty());
}

TEST_F(SharedBarrierTest, WaitersLearnAnOutcomeDecidedOnTheOtherServer) {
  constexpr uint32_t kRanks = 3;
  const uint64_t ino = Declare("step_2", kRanks);
  // Rank 0 waits on X in one long poll of 20 s; ranks 1 (no_wait) and 2
  // arrive through Y, the last one there. X learns the outcome from the
  // store (its look finds the checkpoint ended), well before the poll runs
  // out: 10 s is generous for a loaded machine, and without that look X
  // would answer only after the 20 s, PENDING.
  std::promise<Result> x_answer;
  const absl::Time asked = absl::Now();
  x_->coordinator->Commit(ino, 0, 20000, [&](Result r) { x_answer.set_value(r); });
  std::promise<Result> one;
  y_->coordinator->CommitNoWait(ino, 1, [&](Result r) { one.set_value(r); });
  ASSERT_TRUE(one.get_future().get().ok());
  Result on_y = Commit(*y_, ino, 2);
  Result on_x = x_answer.get_future().get();
  const absl::Duration took = absl::Now() - asked;
  ASSERT_TRUE(on_x.ok()) << on_x.status();
  ASSERT_TRUE(on_y.ok()) << on_y.status();
  EXPECT_EQ(on_x->state(), COMMITTED);
  EXPECT_EQ(on_y->state(), COMMITTED);
  EXPECT_EQ(on_x->ended_ms(), on_y->ended_ms());
  EXPECT_LT(took, absl::Seconds(10));
}

TEST_F(SharedBarrierTest, TimeoutCountsTheArrivalsOfBothServers) {
  constexpr uint32_t kRanks = 3;
  const uint64_t ino = Declare("step_3", kRanks, /*timeout_s=*/3);
  // Both arrivals are stored before the deadline can pass (the first one
  // starts the 3 s); then each rank waits on its server.
  ASSERT_TRUE(ArriveNoWait(*x_, ino, 0).ok());
  ASSERT_TRUE(ArriveNoWait(*y_, ino, 1).ok());
  std::future<Result> on_x = std::async(std::launch::async, [&] { return Commit(*x_, ino, 0); });
  std::future<Result> on_y = std::async(std::launch::async, [&] { return Commit(*y_, ino, 1); });
  for (Result result : {on_x.get(), on_y.get()}) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(ErrnoFromStatus(result.status()), ETIMEDOUT) << result.status();
    EXPECT_TRUE(absl::StrContains(result.status().message(), "2 of 3 ranks")) << result.status();
    EXPECT_TRUE(absl::StrContains(result.status().message(), "missing rank 2")) << result.status();
  }
  absl::StatusOr<CheckpointInfo> info = x_->store->Get(ino);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state(), ABORTED);
}

TEST_F(SharedBarrierTest, ARankRetriedThroughTheOtherServerCountsOnce) {
  constexpr uint32_t kRanks = 3;
  const uint64_t ino = Declare("step_4", kRanks);
  // Rank 0 arrives through X and (its server "died", its call retried)
  // again through Y, with no_wait.
  auto arrive_no_wait = [&](Server& server, uint32_t rank) {
    std::promise<Result> promise;
    server.coordinator->CommitNoWait(ino, rank, [&](Result r) { promise.set_value(r); });
    return promise.get_future().get();
  };
  ASSERT_TRUE(arrive_no_wait(*x_, 0).ok());
  ASSERT_TRUE(arrive_no_wait(*y_, 0).ok());
  ASSERT_TRUE(arrive_no_wait(*y_, 1).ok());
  absl::StatusOr<CheckpointInfo> info = x_->store->Get(ino);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state(), PENDING);
  EXPECT_EQ(info->arrived(), 2u);
  Result last = Commit(*x_, ino, 2);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->state(), COMMITTED);
}

TEST_F(SharedBarrierTest, TheServerThatLostTheCommitRaceAppliesNoRetention) {
  MkdirRequest mkdir;
  mkdir.set_parent(kRootIno);
  mkdir.set_name("run");
  mkdir.set_mode(0755);
  absl::StatusOr<Attr> run = x_->ns->Mkdir(mkdir);
  ASSERT_TRUE(run.ok()) << run.status();
  const uint64_t first = Declare("first", 2, 0, run->ino());
  const uint64_t second = Declare("second", 1, 0, run->ino());
  // Y's commit of `first` is held back: rank 1's arrival through Y
  // completes Y's barrier (rank 0 is stored) and queues it there at once.
  y_->committer->Hold();
  ASSERT_TRUE(ArriveNoWait(*x_, first, 0).ok());
  std::future<Result> on_y = std::async(std::launch::async, [&] { return Commit(*y_, first, 1); });
  ASSERT_TRUE(y_->committer->AwaitEntered());
  // X sees every rank stored and commits `first`; then `second` commits
  // through a third server, newer. Stopping that server joins its commit
  // worker, which has then concluded `second` (no keep yet: no retention).
  ASSERT_EQ(AwaitEnded(first), COMMITTED);
  absl::SleepFor(absl::Milliseconds(5));  // a later ended_ms
  Server z(&kv_);
  ASSERT_TRUE(z.coordinator->Start().ok());
  Result newer = Commit(z, second, 0);
  z.coordinator->Stop();
  ASSERT_TRUE(newer.ok()) << newer.status();
  ASSERT_EQ(newer->state(), COMMITTED);
  // Retention from now on keeps one: the newest, `second`.
  SetXattrRequest keep;
  keep.set_ino(run->ino());
  keep.set_name(std::string(kKeepXattr));
  keep.set_value("1");
  ASSERT_TRUE(x_->ns->SetXattr(keep).ok());
  // Y's commit of `first` runs now and finds it committed by X.
  y_->committer->Release();
  Result late = on_y.get();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->state(), COMMITTED);
  // Stop joins Y's commit worker once it concluded `first`: without
  // retention, which would have removed `second` as older than `first`.
  y_->coordinator->Stop();
  absl::StatusOr<CheckpointInfo> kept = x_->store->Get(second);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->state(), COMMITTED);
  absl::StatusOr<ListCheckpointsReply> list = x_->store->List(run->ino());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->latest(), "second");
  EXPECT_EQ(x_->committer->AwaitApplied(1), 1);  // first
  EXPECT_EQ(z.committer->AwaitApplied(1), 1);    // second
  EXPECT_EQ(y_->committer->applied(), 0);
}

TEST_F(SharedBarrierTest, OnlyOneOfTwoCommitsOrAbortsApplies) {
  // The stores alone: no coordinator commits behind the test's back.
  x_->coordinator->Stop();
  y_->coordinator->Stop();
  const uint64_t committed = Declare("committed", 1);
  ASSERT_TRUE(x_->store->Arrive(committed, 0).ok());
  // Both servers prepared before either finished.
  absl::StatusOr<CheckpointStore::Prepared> on_x = x_->store->PrepareCommit(committed);
  absl::StatusOr<CheckpointStore::Prepared> on_y = y_->store->PrepareCommit(committed);
  ASSERT_TRUE(on_x.ok()) << on_x.status();
  ASSERT_TRUE(on_y.ok()) << on_y.status();
  ASSERT_EQ(on_x->info.state(), PENDING);
  ASSERT_EQ(on_y->info.state(), PENDING);
  absl::StatusOr<CheckpointStore::Finished> won = x_->store->FinishCommit(committed, *on_x);
  absl::StatusOr<CheckpointStore::Finished> lost = y_->store->FinishCommit(committed, *on_y);
  ASSERT_TRUE(won.ok()) << won.status();
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_TRUE(won->applied);
  EXPECT_EQ(won->info.state(), COMMITTED);
  EXPECT_FALSE(lost->changed);
  EXPECT_FALSE(lost->applied);
  EXPECT_EQ(lost->info.state(), COMMITTED);
  EXPECT_EQ(lost->info.ended_ms(), won->info.ended_ms());
  // An abort of the committed checkpoint applies nothing.
  absl::StatusOr<CheckpointStore::Ended> late = y_->store->AbortIfPending(committed, EIO, "late");
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_FALSE(late->applied);
  EXPECT_EQ(late->info.state(), COMMITTED);

  const uint64_t aborted = Declare("aborted", 2);
  absl::StatusOr<CheckpointStore::Ended> first = x_->store->AbortIfPending(aborted, EIO, "x");
  absl::StatusOr<CheckpointStore::Ended> second = y_->store->AbortIfPending(aborted, EIO, "y");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(first->applied);
  EXPECT_FALSE(second->applied);
  EXPECT_EQ(second->info.state(), ABORTED);
  EXPECT_EQ(second->info.abort_reason(), "x");
}

TEST_F(SharedBarrierTest, TheDutyHolderTimesOutACheckpointWhoseServerDied) {
  constexpr uint32_t kRanks = 2;
  const uint64_t ino = Declare("orphaned", kRanks, /*timeout_s=*/2);
  // Rank 0 arrives through a third server, which then dies (its barrier
  // goes with it); rank 1 never comes, and no rank arrives through X or Y.
  {
    Server z(&kv_);
    ASSERT_TRUE(z.coordinator->Start().ok());
    ASSERT_TRUE(ArriveNoWait(z, ino, 0).ok());
    z.coordinator->Stop();
  }
  // X holds the duties: it watches the checkpoint, whose deadline aborts it.
  x_->coordinator->set_adopt_pending(true);
  ASSERT_EQ(AwaitEnded(ino), ABORTED);
  absl::StatusOr<CheckpointInfo> info = y_->store->Get(ino);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->abort_errno(), ETIMEDOUT);
  EXPECT_TRUE(absl::StrContains(info->abort_reason(), "1 of 2 ranks")) << info->abort_reason();
  EXPECT_TRUE(absl::StrContains(info->abort_reason(), "missing rank 1")) << info->abort_reason();
}

TEST_F(SharedBarrierTest, TheDutyHolderCommitsACompleteCheckpointWhoseServerDied) {
  constexpr uint32_t kRanks = 2;
  const uint64_t ino = Declare("orphaned_complete", kRanks);
  // Both arrivals were stored by a server that died before its barrier
  // queued the commit: the store has them, no server has a barrier.
  ASSERT_TRUE(x_->store->Arrive(ino, 0).ok());
  ASSERT_TRUE(x_->store->Arrive(ino, 1).ok());
  absl::SleepFor(absl::Milliseconds(100));  // several looks: none commits it
  ASSERT_EQ(x_->store->Get(ino)->state(), PENDING);
  // Y holds the duties: it watches the checkpoint, finds it complete and
  // commits it.
  y_->coordinator->set_adopt_pending(true);
  EXPECT_EQ(AwaitEnded(ino), COMMITTED);
  EXPECT_EQ(y_->committer->AwaitApplied(1), 1);
}

}  // namespace
}  // namespace ckptfs::meta
