// The commit barrier through the CheckpointCoordinator, on a manual clock
// with a fake storage server: N ranks committing at once, idempotent
// retries, long polls, timeouts (ETIMEDOUT, files reclaimed at once), files
// open for writing (EBUSY) or damaged (EIO), one whole-store SYNC per
// storage server, the `latest` symlink, retention, removal, and a restarted
// service resuming its barriers from the store.
#include <cerrno>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/meta/checkpoint/xattr_rules.h"
#include "tests/meta/checkpoint_test_util.h"
#include "tests/meta/fault_kv_store.h"

namespace ckptfs::meta {
namespace {

// Polls `condition` until it holds (bounded, so a bug fails instead of
// hanging). For effects that follow an answered commit on another thread.
template <typename Condition>
bool Eventually(Condition condition) {
  for (int i = 0; i < 6000; ++i) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return condition();
}

class CheckpointBarrierTest : public CheckpointFixture {
 protected:
  size_t ArrivalRecords(uint64_t ckpt) {
    auto records = store_->Scan(ArrivalPrefix(ckpt), "", 100000);
    EXPECT_TRUE(records.ok());
    return records.ok() ? records->size() : 0;
  }
  std::string LatestOf(uint64_t run) {
    auto latest = ns_->Lookup(run, "latest");
    if (!latest.ok()) return "<none>";
    auto target = ns_->ReadLink(latest->ino());
    return target.ok() ? *target : "<not a symlink>";
  }
  // Every due orphan's inode.
  std::vector<uint64_t> DueOrphans() {
    std::vector<uint64_t> inos;
    auto due = ns_->DueOrphans(0, 100000);
    EXPECT_TRUE(due.ok());
    if (due.ok()) {
      for (const auto& orphan : *due) inos.push_back(orphan.ino);
    }
    return inos;
  }
};

TEST_F(CheckpointBarrierTest, ManyRanksCommitTogether) {
  constexpr uint32_t kRanks = 32;
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "step-100");
  ASSERT_OK(Declare(ckpt, kRanks));
  std::vector<std::shared_ptr<CommitCall>> calls(kRanks);
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] {
      // Each rank writes its shard through a registered writer, closes it,
      // then commits.
      CreateRequest create;
      create.set_parent(ckpt);
      create.set_name(absl::StrCat("rank-", rank, ".pt"));
      create.set_mode(0644);
      create.set_writer_handle(1000 + rank);
      auto file = ns_->Create(create);
      ASSERT_TRUE(file.ok()) << file.status();
      CommitWriteRequest close;
      close.set_ino(file->attr().ino());
      close.set_size(4096);
      close.set_release_writer(1000 + rank);
      ASSERT_OK(ns_->CommitWrite(close));
      calls[rank] = StartCommit(ckpt, rank);
    });
  }
  for (std::thread& thread : ranks) thread.join();
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    ASSERT_NE(calls[rank], nullptr);
    auto info = calls[rank]->Wait();
    ASSERT_TRUE(info.ok()) << "rank " << rank << ": " << info.status();
    EXPECT_EQ(info->state(), COMMITTED);
    EXPECT_EQ(info->arrived(), kRanks);
    EXPECT_EQ(info->files(), kRanks);
    EXPECT_EQ(info->bytes(), kRanks * 4096u);
  }
  auto info = ckpts_->Get(ckpt);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), COMMITTED);
  EXPECT_GT(info->ended_ms(), 0);
  EXPECT_EQ(LatestOf(run), "step-100");
  // One sync of the whole store, not one per file.
  EXPECT_EQ(storage_.Count(data::SYNC, /*whole_store=*/true), 1u);
  EXPECT_EQ(storage_.Count(data::SYNC), 1u);
  EXPECT_TRUE(Eventually([&] { return ArrivalRecords(ckpt) == 0; }));
  EXPECT_FALSE(store_->Get(PendingCheckpointKey(ckpt))->has_value());
}

TEST_F(CheckpointBarrierTest, ThousandsOfRanksWaitOnOneThread) {
  // Every commit below is issued from this one thread: a waiting rank costs
  // the service a callback in the barrier, never a thread.
  constexpr uint32_t kRanks = 4096;
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, kRanks));
  for (int i = 0; i < 16; ++i) File(ckpt, absl::StrCat("shard-", i));
  std::vector<std::shared_ptr<CommitCall>> calls;
  for (uint32_t rank = 0; rank + 1 < kRanks; ++rank) calls.push_back(StartCommit(ckpt, rank));
  size_t answered = 0;
  for (const auto& call : calls) answered += call->done.HasBeenNotified() ? 1 : 0;
  EXPECT_EQ(answered, 0u);
  EXPECT_EQ(ckpts_->Get(ckpt)->arrived(), kRanks - 1);
  const absl::Time last_arrival = absl::Now();
  calls.push_back(StartCommit(ckpt, kRanks - 1));
  for (const auto& call : calls) {
    auto info = call->Wait();
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_EQ(info->state(), COMMITTED);
  }
  std::cout << "last arrival to last release of " << kRanks
            << " ranks: " << absl::FormatDuration(absl::Now() - last_arrival) << "\n";
  EXPECT_EQ(storage_.Count(data::SYNC, true), 1u);
}

TEST_F(CheckpointBarrierTest, ARetryWaitsForTheSameOutcome) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  auto first = StartCommit(ckpt, 0);
  auto retry = StartCommit(ckpt, 0);  // e.g. after EINTR
  auto pending = StartCommit(ckpt, 0, /*wait_ms=*/20);
  auto polled = pending->Wait();
  ASSERT_TRUE(polled.ok()) << polled.status();
  EXPECT_EQ(polled->state(), PENDING);
  EXPECT_EQ(polled->arrived(), 1u);  // rank 0 counted once
  EXPECT_EQ(polled->timeout_s(), 600u);
  EXPECT_FALSE(first->done.HasBeenNotified());
  EXPECT_EQ(ArrivalRecords(ckpt), 1u);
  auto last = StartCommit(ckpt, 1);
  for (auto* call : {&first, &retry, &last}) {
    auto info = (*call)->Wait();
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->state(), COMMITTED);
  }
  auto late = StartCommit(ckpt, 0)->Wait();  // after the end: at once
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->state(), COMMITTED);
}

TEST_F(CheckpointBarrierTest, BadCommitsAreRefusedAndRecordNothing) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  EXPECT_ERRNO(StartCommit(ckpt, 2)->Wait(), EINVAL);
  EXPECT_ERRNO(StartCommit(ckpt, UINT32_MAX)->Wait(), EINVAL);
  const uint64_t plain = Dir(kRootIno, "plain");
  EXPECT_ERRNO(StartCommit(plain, 0)->Wait(), EINVAL);
  EXPECT_ERRNO(StartCommit(File(kRootIno, "f"), 0)->Wait(), ENOTDIR);
  EXPECT_ERRNO(StartCommit(99999, 0)->Wait(), ENOENT);
  EXPECT_EQ(ArrivalRecords(ckpt), 0u);
  EXPECT_EQ(ckpts_->Get(ckpt)->first_commit_ms(), 0);
}

TEST_F(CheckpointBarrierTest, TimeoutAbortsEveryWaiterAndReclaimsAtOnce) {
  const uint64_t run = Dir(kRootIno, "run");
  Committed(run, "good");
  const uint64_t ckpt = Dir(run, "bad");
  ASSERT_OK(Declare(ckpt, 3, /*timeout_s=*/5));
  const uint64_t sub = Dir(ckpt, "sub");
  const uint64_t a = File(ckpt, "a.pt"), b = File(sub, "b.pt");
  // The timeout counts from the first commit, not from the declaration.
  clock_.Advance(absl::Seconds(100));
  coordinator_->RunTimers();
  auto rank0 = StartCommit(ckpt, 0);
  auto rank1 = StartCommit(ckpt, 1);
  clock_.Advance(absl::Seconds(4));
  coordinator_->RunTimers();
  EXPECT_EQ(ckpts_->Get(ckpt)->state(), PENDING);
  clock_.Advance(absl::Seconds(2));
  coordinator_->RunTimers();
  for (auto* call : {&rank0, &rank1}) {
    auto result = (*call)->Wait();
    EXPECT_ERRNO(result, ETIMEDOUT);
    EXPECT_TRUE(absl::StrContains(result.status().message(), "missing rank 2")) << result.status();
  }
  auto info = ckpts_->Get(ckpt);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), ABORTED);
  EXPECT_EQ(info->abort_errno(), ETIMEDOUT);
  EXPECT_EQ(info->arrived(), 2u);
  EXPECT_EQ(info->files(), 2u);
  // The directory stays, empty; its files are orphans due now; the subdir
  // is gone; `latest` still names the good one.
  EXPECT_EQ(ns_->Lookup(run, "bad")->ino(), ckpt);
  EXPECT_EQ(ns_->ReadDir(ckpt, "", 0)->entries_size(), 0);
  EXPECT_EQ(ns_->GetAttr(ckpt)->nlink(), 2u);
  EXPECT_ERRNO(ns_->GetAttr(sub), ENOENT);
  const std::vector<uint64_t> due = DueOrphans();
  EXPECT_NE(std::find(due.begin(), due.end(), a), due.end());
  EXPECT_NE(std::find(due.begin(), due.end(), b), due.end());
  EXPECT_EQ(LatestOf(run), "good");
  // Later commits learn the outcome at once.
  EXPECT_ERRNO(StartCommit(ckpt, 2)->Wait(), ETIMEDOUT);
  EXPECT_ERRNO(StartCommit(ckpt, 0)->Wait(), ETIMEDOUT);
}

TEST_F(CheckpointBarrierTest, AFileOpenForWritingAbortsWithEbusyNamingIt) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  const uint64_t sub = Dir(ckpt, "sub");
  File(ckpt, "closed.pt");
  CreateRequest create;
  create.set_parent(sub);
  create.set_name("open.pt");
  create.set_mode(0644);
  create.set_writer_handle(42);
  auto open = ns_->Create(create);
  ASSERT_TRUE(open.ok()) << open.status();
  const uint64_t open_ino = open->attr().ino();
  const uint64_t closed_ino = ns_->Lookup(ckpt, "closed.pt")->ino();
  auto rank0 = StartCommit(ckpt, 0);
  auto rank1 = StartCommit(ckpt, 1);
  for (auto* call : {&rank0, &rank1}) {
    auto result = (*call)->Wait();
    EXPECT_ERRNO(result, EBUSY);
    EXPECT_TRUE(
        absl::StrContains(result.status().message(), "ckpt/sub/open.pt is still open for writing"))
        << result.status();
  }
  EXPECT_EQ(ckpts_->Get(ckpt)->state(), ABORTED);
  EXPECT_EQ(storage_.Count(data::SYNC), 0u);  // never synced
  EXPECT_EQ(LatestOf(run), "<none>");
  // The closed file's chunks go at once; the open one's writes may still be
  // in flight (they would recreate chunks after a trim), so it waits.
  const std::vector<uint64_t> due = DueOrphans();
  EXPECT_NE(std::find(due.begin(), due.end(), closed_ino), due.end());
  EXPECT_EQ(std::find(due.begin(), due.end(), open_ino), due.end());

  // The writer closes after the abort, having rewritten bytes in place: its
  // release is accepted, size and mtime stay, and ctime moves, since the
  // content did change (readers' caches must not keep what they had).
  const InodeRecord before = Inode(open_ino);
  CommitWriteRequest close;
  close.set_ino(open_ino);
  close.set_size(0);
  close.set_mtime_ns(12345);
  close.set_release_writer(42);
  ASSERT_OK(ns_->CommitWrite(close));
  const InodeRecord after = Inode(open_ino);
  EXPECT_EQ(after.writer_handles_size(), 0);
  EXPECT_EQ(after.attr().size(), before.attr().size());
  EXPECT_EQ(after.attr().mtime_ns(), before.attr().mtime_ns());
  EXPECT_GT(after.attr().ctime_ns(), before.attr().ctime_ns());
}

TEST_F(CheckpointBarrierTest, ADamagedFileAbortsWithEio) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 1));
  CommitWriteRequest failed;
  failed.set_ino(File(ckpt, "torn.pt"));
  failed.set_failed(true);
  ASSERT_OK(ns_->CommitWrite(failed));
  EXPECT_ERRNO(CommitAll(ckpt, 1), EIO);
  EXPECT_EQ(ckpts_->Get(ckpt)->abort_errno(), EIO);
}

TEST_F(CheckpointBarrierTest, AFailedWriteAbortsAPendingCheckpointAtOnce) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  const uint64_t file = File(ckpt, "shard.pt");
  auto waiting = StartCommit(ckpt, 0);
  CommitWriteRequest failed;
  failed.set_ino(file);
  failed.set_failed(true);
  ASSERT_OK(ns_->CommitWrite(failed));
  ASSERT_OK(coordinator_->WriteFailed(file));
  // Answered now, not at the timeout.
  ASSERT_TRUE(waiting->done.HasBeenNotified());
  EXPECT_ERRNO(waiting->result, EIO);
  EXPECT_ERRNO(StartCommit(ckpt, 1)->Wait(), EIO);
  // A failed write outside any checkpoint only marks the file.
  const uint64_t other = File(kRootIno, "other.pt");
  failed.set_ino(other);
  ASSERT_OK(ns_->CommitWrite(failed));
  EXPECT_OK(coordinator_->WriteFailed(other));
}

TEST_F(CheckpointBarrierTest, OneWholeStoreSyncPerServerHoldingChunks) {
  FakeStorageServer second;
  AddServer("uuid-second", 1 << 30, 0, second.address());
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 1));
  for (int i = 0; i < 6; ++i) File(ckpt, absl::StrCat("f", i));  // spread over both
  File(ckpt, "empty", 0);
  FakeStorageServer idle;  // registered after the files: holds none of them
  AddServer("uuid-idle", 1 << 30, 0, idle.address());
  auto info = CommitAll(ckpt, 1);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state(), COMMITTED);
  EXPECT_EQ(info->files(), 7u);
  EXPECT_EQ(storage_.Count(data::SYNC, true), 1u);
  EXPECT_EQ(second.Count(data::SYNC, true), 1u);
  EXPECT_EQ(idle.requests().size(), 0u);
}

TEST_F(CheckpointBarrierTest, AServerSlowToSyncHoldsBackOnlyTheCommitsThatNeedIt) {
  const uint64_t run_a = Dir(kRootIno, "run-a");
  const uint64_t run_b = Dir(kRootIno, "run-b");
  const uint64_t slow = Dir(run_a, "slow");
  ASSERT_OK(Declare(slow, 1));
  File(slow, "model.pt");  // chunks on the storage server, which stops answering
  storage_.Hold();
  auto held = StartCommit(slow, 0);
  storage_.WaitForRequests(1);  // its SYNC waits
  // Another job's checkpoint (no chunks to sync) commits meanwhile.
  const uint64_t other = Dir(run_b, "other");
  ASSERT_OK(Declare(other, 1));
  File(other, "empty", 0);
  absl::StatusOr<CheckpointInfo> committed = CommitAll(other, 1);
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(committed->state(), COMMITTED);
  EXPECT_FALSE(held->done.HasBeenNotified());
  // One of the same run directory commits after the slow one, so that its
  // retention and `latest` see the slow one committed.
  const uint64_t next = Dir(run_a, "next");
  ASSERT_OK(Declare(next, 1));
  File(next, "empty", 0);
  auto queued = StartCommit(next, 0);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(queued->done.HasBeenNotified());
  storage_.Release();
  absl::StatusOr<CheckpointInfo> first = held->Wait();
  absl::StatusOr<CheckpointInfo> second = queued->Wait();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->state(), COMMITTED);
  EXPECT_EQ(second->state(), COMMITTED);
  EXPECT_LE(first->ended_ms(), second->ended_ms());
  EXPECT_EQ(LatestOf(run_a), "next");
}

TEST_F(CheckpointBarrierTest, AFailedSyncAbortsWithEio) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "ckpt");
  ASSERT_OK(Declare(ckpt, 1));
  File(ckpt, "model.pt");
  storage_.set_error(EIO);
  auto result = CommitAll(ckpt, 1);
  EXPECT_ERRNO(result, EIO);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "sync of storage server"))
      << result.status();
  EXPECT_EQ(ckpts_->Get(ckpt)->state(), ABORTED);
  EXPECT_EQ(LatestOf(run), "<none>");
}

// The storage-server incarnations that the writers' size commits reported
// holding unsynced writes go with each server's SYNC, which a server that
// restarted since refuses; reported twice, an incarnation is sent once.
TEST_F(CheckpointBarrierTest, TheSyncNamesTheIncarnationsHoldingUnsyncedWrites) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 1));
  const uint64_t file = File(ckpt, "model.pt", 0);
  for (uint64_t incarnation : {7u, 9u, 7u}) {
    CommitWriteRequest request;
    request.set_ino(file);
    request.set_size(1000);
    StorageIncarnation* unsynced = request.add_unsynced();
    unsynced->set_server_id(server_id_);
    unsynced->set_incarnation(incarnation);
    ASSERT_OK(ns_->CommitWrite(request));
  }
  EXPECT_EQ(Inode(file).unsynced_size(), 2);
  auto info = CommitAll(ckpt, 1);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(storage_.Count(data::SYNC, true), 1u);
  for (const data::RequestHeader& request : storage_.requests()) {
    if (request.op() != data::SYNC) continue;
    EXPECT_EQ(std::vector<uint64_t>(request.written_by().begin(), request.written_by().end()),
              (std::vector<uint64_t>{7, 9}));
  }
}

TEST_F(CheckpointBarrierTest, ATruncationToZeroForgetsTheUnsyncedIncarnations) {
  const uint64_t file = File(kRootIno, "f", 0);
  CommitWriteRequest request;
  request.set_ino(file);
  request.set_size(1000);
  StorageIncarnation* unsynced = request.add_unsynced();
  unsynced->set_server_id(server_id_);
  unsynced->set_incarnation(5);
  ASSERT_OK(ns_->CommitWrite(request));
  EXPECT_EQ(Inode(file).unsynced_size(), 1);
  ASSERT_OK(ns_->Open(file, /*truncate=*/true));
  EXPECT_EQ(Inode(file).unsynced_size(), 0);
}

TEST_F(CheckpointBarrierTest, AChangeDuringTheSyncIsVerifiedAgain) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 1));
  File(ckpt, "model.pt");
  storage_.Hold();
  auto rank0 = StartCommit(ckpt, 0);
  storage_.WaitForRequests(1);  // the committer is in its sync
  CreateRequest create;         // a writer appears meanwhile
  create.set_parent(ckpt);
  create.set_name("late.pt");
  create.set_mode(0644);
  create.set_writer_handle(7);
  ASSERT_OK(ns_->Create(create));
  storage_.Release();
  auto result = rank0->Wait();
  EXPECT_ERRNO(result, EBUSY);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "late.pt")) << result.status();
}

TEST_F(CheckpointBarrierTest, AFileGrowingDuringTheSyncIsCountedAsItIsAtTheCommit) {
  // Only the file's inode changes (not the directory): the commit, staged
  // in the transaction that verified the files, must still notice.
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 1));
  const uint64_t file = File(ckpt, "model.pt", 1000);
  storage_.Hold();
  auto rank0 = StartCommit(ckpt, 0);
  storage_.WaitForRequests(1);  // the committer is in its sync
  ASSERT_OK(ns_->CommitWrite(file, 5000, 0));
  storage_.Release();
  auto result = rank0->Wait();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->state(), COMMITTED);
  EXPECT_EQ(result->bytes(), 5000u);
  EXPECT_EQ(ckpts_->Get(ckpt)->bytes(), 5000u);
  EXPECT_EQ(storage_.Count(data::SYNC), 2u);  // verified and synced again
}

TEST_F(CheckpointBarrierTest, ACommitThatKeepsFailingAbortsWithEioInsteadOfWaitingForever) {
  FaultKvStore faulty(store_.get());
  DropCheckpointParts();
  ckpt_kv_ = &faulty;
  coordinator_options_.max_commit_attempts = 3;
  coordinator_options_.retry_delay = absl::Milliseconds(10);
  coordinator_options_.max_timer_sleep = absl::Milliseconds(10);
  MakeCheckpointParts();
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "ckpt");
  ASSERT_OK(Declare(ckpt, 1));
  File(ckpt, "model.pt");
  // The arrival is stored; the three commit transactions after it fail.
  faulty.BeforeNextCommit([&] { faulty.InjectErrors(3, absl::UnavailableError("disk gone")); });
  auto result = StartCommit(ckpt, 0)->Wait();
  EXPECT_ERRNO(result, EIO);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "failed 3 times")) << result.status();
  EXPECT_EQ(ckpts_->Get(ckpt)->state(), ABORTED);
  DropCheckpointParts();
  ckpt_kv_ = nullptr;
}

TEST_F(CheckpointBarrierTest, LatestFollowsCommitsAndRemovals) {
  const uint64_t run = Dir(kRootIno, "run");
  Committed(run, "a");
  EXPECT_EQ(LatestOf(run), "a");
  const uint64_t latest_ino = ns_->Lookup(run, "latest")->ino();
  clock_.Advance(absl::Seconds(1));
  Committed(run, "b");
  EXPECT_EQ(LatestOf(run), "b");
  // A new symlink, not the old one retargeted: mounts cache a symlink's
  // target per inode.
  EXPECT_NE(ns_->Lookup(run, "latest")->ino(), latest_ino);
  EXPECT_ERRNO(ns_->GetAttr(latest_ino), ENOENT);
  auto list = ckpts_->List(run);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->latest(), "b");
  ASSERT_EQ(list->checkpoints_size(), 2);
  EXPECT_EQ(list->checkpoints(0).name(), "a");

  ASSERT_OK(coordinator_->Remove(run, "b"));
  EXPECT_EQ(LatestOf(run), "a");
  ASSERT_OK(coordinator_->Remove(run, "a"));
  EXPECT_EQ(LatestOf(run), "<none>");
  EXPECT_ERRNO(coordinator_->Remove(run, "a"), ENOENT);
  Dir(run, "plain");
  EXPECT_ERRNO(coordinator_->Remove(run, "plain"), EINVAL);

  // A "latest" that is not a symlink is the user's: left alone.
  const uint64_t other = Dir(kRootIno, "other");
  const uint64_t mine = File(other, "latest");
  Committed(other, "c");
  EXPECT_EQ(ns_->Lookup(other, "latest")->ino(), mine);
  EXPECT_EQ(ckpts_->List(other)->latest(), "c");
}

TEST_F(CheckpointBarrierTest, RetentionKeepsTheNewestCommittedAndDropsAborted) {
  const uint64_t run = Dir(kRootIno, "run");
  Keep(run, "2");
  const uint64_t c1 = Committed(run, "c1");
  const uint64_t c1_file = ns_->Lookup(c1, "model.pt")->ino();
  clock_.Advance(absl::Seconds(1));
  Committed(run, "c2");
  clock_.Advance(absl::Seconds(1));
  const uint64_t aborted = Dir(run, "c3");
  ASSERT_OK(Declare(aborted, 1));
  ASSERT_OK(ckpts_->Abort(aborted, EIO, "test"));
  const uint64_t pending = Dir(run, "c4");
  ASSERT_OK(Declare(pending, 2));
  // c1 is the third newest committed only once c5 commits.
  EXPECT_TRUE(ns_->Lookup(run, "c1").ok());
  clock_.Advance(absl::Seconds(1));
  Committed(run, "c5");
  EXPECT_TRUE(Eventually([&] { return !ns_->Lookup(run, "c1").ok(); }));
  EXPECT_TRUE(Eventually([&] { return !ns_->Lookup(run, "c3").ok(); }));
  EXPECT_ERRNO(ns_->Lookup(run, "c1"), ENOENT);
  EXPECT_TRUE(ns_->Lookup(run, "c2").ok());
  EXPECT_TRUE(ns_->Lookup(run, "c4").ok());
  EXPECT_TRUE(ns_->Lookup(run, "c5").ok());
  EXPECT_EQ(LatestOf(run), "c5");
  const std::vector<uint64_t> due = DueOrphans();
  EXPECT_NE(std::find(due.begin(), due.end(), c1_file), due.end());
}

TEST_F(CheckpointBarrierTest, RetentionKeepsTheCheckpointJustCommittedWhenTheClockStepsBack) {
  const uint64_t run = Dir(kRootIno, "run");
  Keep(run, "1");
  Committed(run, "c1");
  clock_.Advance(absl::Seconds(-10));  // NTP stepped the clock back
  const uint64_t c2 = Committed(run, "c2");
  EXPECT_TRUE(Eventually([&] { return !ns_->Lookup(run, "c1").ok(); }));
  EXPECT_EQ(ns_->Lookup(run, "c2")->ino(), c2);
  EXPECT_EQ(LatestOf(run), "c2");
}

TEST_F(CheckpointBarrierTest, RetentionTakesOnlyTheCheckpointsOfTheCommittedOnesOwner) {
  const uint64_t run = Dir(kRootIno, "run");
  Keep(run, "1");
  auto owned_by = [&](const std::string& name, uint32_t uid) {
    const uint64_t ckpt = Dir(run, name);
    Chown(ckpt, uid);
    return ckpt;
  };
  // Another user's aborted checkpoint; then root commits twice. No commit
  // of the other user's runs before the look below, so no retention of
  // theirs may take it meanwhile.
  const uint64_t aborted = owned_by("theirs-aborted", 1000);
  ASSERT_OK(Declare(aborted, 1));
  ASSERT_OK(ckpts_->Abort(aborted, EIO, "test"));
  clock_.Advance(absl::Seconds(1));
  Committed(run, "mine1");
  clock_.Advance(absl::Seconds(1));
  Committed(run, "mine2");
  // Retention removes aborted checkpoints before committed ones: had it
  // taken theirs-aborted, that would be gone once mine1 is.
  EXPECT_TRUE(Eventually([&] { return !ns_->Lookup(run, "mine1").ok(); }));
  EXPECT_TRUE(ns_->Lookup(run, "theirs-aborted").ok());
  // The other user's commits take theirs, and leave root's newest.
  auto commit_theirs = [&](const std::string& name) {
    const uint64_t ckpt = owned_by(name, 1000);
    EXPECT_OK(Declare(ckpt, 1));
    File(ckpt, "model.pt");
    EXPECT_OK(CommitAll(ckpt, 1));
  };
  clock_.Advance(absl::Seconds(1));
  commit_theirs("theirs1");
  EXPECT_TRUE(Eventually([&] { return !ns_->Lookup(run, "theirs-aborted").ok(); }));
  clock_.Advance(absl::Seconds(1));
  commit_theirs("theirs2");
  EXPECT_TRUE(Eventually([&] { return !ns_->Lookup(run, "theirs1").ok(); }));
  EXPECT_TRUE(ns_->Lookup(run, "mine2").ok());
  EXPECT_TRUE(ns_->Lookup(run, "theirs2").ok());
}

TEST_F(CheckpointBarrierTest, RemovingAPendingCheckpointFailsItsWaiters) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  const uint64_t file = File(ckpt, "a.pt");
  auto waiting = StartCommit(ckpt, 0);
  ASSERT_OK(coordinator_->Remove(run, "ckpt"));
  EXPECT_ERRNO(waiting->Wait(), ENOENT);
  EXPECT_ERRNO(ns_->Lookup(run, "ckpt"), ENOENT);
  const std::vector<uint64_t> due = DueOrphans();
  EXPECT_NE(std::find(due.begin(), due.end(), file), due.end());
  EXPECT_EQ(ArrivalRecords(ckpt), 0u);
  EXPECT_FALSE(store_->Get(PendingCheckpointKey(ckpt))->has_value());
}

TEST_F(CheckpointBarrierTest, ARestartKeepsArrivalsAndTheBarrierCompletes) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  File(ckpt, "a.pt");
  auto before = StartCommit(ckpt, 0);
  const int64_t first_commit_ms = ckpts_->Get(ckpt)->first_commit_ms();
  ReopenAll();
  // Waiters of the old service are told to come back.
  auto stopped = before->Wait();
  EXPECT_TRUE(IsServiceStoppingError(stopped.status())) << stopped.status();
  auto info = ckpts_->Get(ckpt);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->arrived(), 1u);
  EXPECT_EQ(info->first_commit_ms(), first_commit_ms);
  auto rank1 = StartCommit(ckpt, 1);
  auto rank0 = StartCommit(ckpt, 0);  // the retry of the interrupted call
  for (auto* call : {&rank0, &rank1}) {
    auto result = (*call)->Wait();
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->state(), COMMITTED);
  }
  EXPECT_EQ(LatestOf(run), "ckpt");
}

TEST_F(CheckpointBarrierTest, ARestartKeepsTheDeadline) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  ASSERT_OK(Declare(ckpt, 2, /*timeout_s=*/5));
  auto before = StartCommit(ckpt, 0);
  clock_.Advance(absl::Seconds(3));
  ReopenAll();
  coordinator_->RunTimers();
  EXPECT_EQ(ckpts_->Get(ckpt)->state(), PENDING);
  clock_.Advance(absl::Seconds(3));  // 6 s after the first commit
  coordinator_->RunTimers();
  auto info = ckpts_->Get(ckpt);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), ABORTED);
  EXPECT_EQ(info->abort_errno(), ETIMEDOUT);
  EXPECT_ERRNO(StartCommit(ckpt, 0)->Wait(), ETIMEDOUT);
}

TEST_F(CheckpointBarrierTest, ARestartCommitsABarrierThatHadCompleted) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  File(ckpt, "a.pt");
  // Both arrivals stored, then the service died before committing.
  ASSERT_OK(ckpts_->Arrive(ckpt, 0));
  ASSERT_OK(ckpts_->Arrive(ckpt, 1));
  EXPECT_EQ(ckpts_->Get(ckpt)->state(), PENDING);
  ReopenAll();  // resumes, sees every rank arrived, commits
  EXPECT_TRUE(Eventually([&] { return ckpts_->Get(ckpt)->state() == COMMITTED; }));
  EXPECT_EQ(LatestOf(run), "ckpt");
  auto late = StartCommit(ckpt, 1)->Wait();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->state(), COMMITTED);
}

}  // namespace
}  // namespace ckptfs::meta
