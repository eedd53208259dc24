// Client's checkpoint calls and the checkpoint xattrs over the metadata
// service in-process (client_fixture.h): commit blocks until every rank
// arrived, aborts surface their errno and reason, bad values change nothing,
// the read-side xattrs, retries across a service that is restarting,
// interruption, and that nothing of a committed checkpoint can be changed
// (EROFS before any storage is touched) but its names removed.
#include <fcntl.h>
#include <sys/xattr.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/cancellation.h"
#include "client/checkpoint_xattr_parsing.h"
#include "client/meta_client.h"
#include "common/errno_status.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

class CheckpointClientTest : public ClientFixture {
 protected:
  void SetUp() override {
    ClientOptions options = DefaultOptions();
    options.commit_poll = absl::Milliseconds(200);  // several polls per test
    MakeClient(options);
    auto run = client_->Mkdir(kRootIno, "run", 0755, 0, 0);
    ASSERT_TRUE(run.ok()) << run.status();
    run_ = run->ino();
  }

  uint64_t MakeCheckpointDir(const std::string& name) {
    auto dir = client_->Mkdir(run_, name, 0755, 0, 0);
    EXPECT_TRUE(dir.ok()) << dir.status();
    return dir.ok() ? dir->ino() : 0;
  }

  // Writes `data` to a new file `name` in `dir` and closes it.
  void WriteFile(uint64_t dir, const std::string& name, const std::string& data) {
    auto created = client_->Create(dir, name, 0644, 0, 0, O_WRONLY | O_CREAT);
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE(created->file->Write(0, data.data(), data.size()).ok());
    ASSERT_TRUE(created->file->Close().ok());
  }

  // Waits until the service has recorded the commits of `n` ranks of
  // checkpoint `dir` (ranks that wait for its outcome).
  void WaitForArrivals(uint64_t dir, uint32_t n) {
    while (true) {
      auto info = service_->Checkpoint(dir);
      ASSERT_TRUE(info.ok()) << info.status();
      if (info->arrived() >= n) return;
      absl::SleepFor(absl::Milliseconds(2));
    }
  }

  int Errno(const absl::Status& status) { return ErrnoFromStatus(status); }

  uint64_t run_ = 0;
};

TEST_F(CheckpointClientTest, CommitBlocksUntilEveryRankArrived) {
  const uint64_t dir = MakeCheckpointDir("step-1");
  ASSERT_TRUE(client_->DeclareCheckpoint(dir, 4).ok());
  std::vector<std::thread> ranks;
  std::atomic<int> returned{0};
  std::vector<absl::Status> results(4);
  for (uint32_t rank = 0; rank < 3; ++rank) {
    ranks.emplace_back([&, rank] {
      WriteFile(dir, absl::StrCat("rank", rank), std::string(1000 + rank, 'a'));
      results[rank] = client_->CommitCheckpoint(dir, rank).status();
      ++returned;
    });
  }
  WaitForArrivals(dir, 3);
  // Several polls go by: nobody returns while rank 3 is missing.
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(returned.load(), 0);
  auto info = client_->GetCheckpoint(dir);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), meta::PENDING);
  EXPECT_EQ(info->arrived(), 3u);
  WriteFile(dir, "rank3", "x");
  auto last = client_->CommitCheckpoint(dir, 3);
  for (std::thread& t : ranks) t.join();
  ASSERT_TRUE(last.ok()) << last.status();
  for (const absl::Status& status : results) EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(last->state(), meta::COMMITTED);
  EXPECT_EQ(last->files(), 4u);
  EXPECT_EQ(last->bytes(), 1000u + 1001 + 1002 + 1);
  EXPECT_EQ(*client_->GetXattr(run_, kLatestXattr), "step-1");
  // The commit synced the storage servers holding the files' chunks.
  EXPECT_GE(service_->storage_syncs(), 1);
  // Idempotent: a rank committing again gets the same outcome at once.
  auto again = client_->CommitCheckpoint(dir, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->state(), meta::COMMITTED);
}

TEST_F(CheckpointClientTest, FileLeftOpenAbortsWithEbusyForEveryRank) {
  const uint64_t dir = MakeCheckpointDir("open");
  ASSERT_TRUE(client_->DeclareCheckpoint(dir, 2).ok());
  auto created = client_->Create(dir, "w", 0644, 0, 0, O_WRONLY | O_CREAT);
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(created->file->Write(0, "abc", 3).ok());  // never closed before the commit
  absl::Status first;
  std::thread rank0([&] { first = client_->CommitCheckpoint(dir, 0).status(); });
  WaitForArrivals(dir, 1);
  absl::Status second = client_->CommitCheckpoint(dir, 1).status();
  rank0.join();
  EXPECT_EQ(Errno(first), EBUSY) << first;
  EXPECT_EQ(Errno(second), EBUSY) << second;
  EXPECT_NE(second.message().find("w is still open for writing"), absl::string_view::npos)
      << second;
  EXPECT_EQ(*client_->GetXattr(dir, kStateXattr), "aborted");
  EXPECT_EQ(ErrnoFromStatus(client_->GetXattr(run_, kLatestXattr).status()), ENODATA);
  // Later commits fail the same way.
  EXPECT_EQ(Errno(client_->CommitCheckpoint(dir, 0).status()), EBUSY);
}

TEST_F(CheckpointClientTest, FailedWriteAbortsWithEio) {
  const uint64_t dir = MakeCheckpointDir("failed");
  ASSERT_TRUE(client_->DeclareCheckpoint(dir, 1).ok());
  auto created = client_->Create(dir, "f", 0644, 0, 0, O_WRONLY | O_CREAT);
  ASSERT_TRUE(created.ok());
  transport_->FailWrites(EIO);
  const std::string data = RandomBytes(2 * kTestChunk, 3);
  (void)created->file->Write(0, data.data(), data.size());
  EXPECT_FALSE(created->file->Close().ok());
  transport_->FailWrites(0);
  // The close told the service; the checkpoint aborted at once.
  EXPECT_EQ(*client_->GetXattr(dir, kStateXattr), "aborted");
  absl::Status committed = client_->CommitCheckpoint(dir, 0).status();
  EXPECT_EQ(Errno(committed), EIO) << committed;
}

TEST_F(CheckpointClientTest, MissingRankTimesOut) {
  const uint64_t dir = MakeCheckpointDir("slow");
  ASSERT_TRUE(client_->DeclareCheckpoint(dir, 2, /*timeout_s=*/1).ok());
  absl::Status status = client_->CommitCheckpoint(dir, 0).status();
  EXPECT_EQ(Errno(status), ETIMEDOUT) << status;
  auto info = client_->GetCheckpoint(dir);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), meta::ABORTED);
  EXPECT_EQ(info->abort_errno(), ETIMEDOUT);
}

TEST_F(CheckpointClientTest, BadXattrValuesAreEinvalAndSendNothing) {
  const uint64_t dir = MakeCheckpointDir("bad");
  for (const char* bad : {"0", "-1", "abc", "8x", ""}) {
    EXPECT_EQ(Errno(client_->SetXattr(dir, kRanksXattr, bad, 0)), EINVAL) << bad;
  }
  for (const char* bad : {"-1", "abc", "8x", ""}) {
    EXPECT_EQ(Errno(client_->SetXattr(dir, kCommitXattr, bad, 0)), EINVAL) << bad;
  }
  EXPECT_EQ(meta_->Calls("DeclareCheckpoint"), 0);
  EXPECT_EQ(meta_->Calls("CommitCheckpoint"), 0);
  EXPECT_EQ(meta_->Calls("SetXattr"), 0);
  EXPECT_EQ(ErrnoFromStatus(client_->GetXattr(dir, kStateXattr).status()), ENODATA);
}

TEST_F(CheckpointClientTest, ServiceRefusalsPassThrough) {
  const uint64_t dir = MakeCheckpointDir("refused");
  // Commit on an undeclared directory.
  EXPECT_EQ(Errno(client_->SetXattr(dir, kCommitXattr, "0", 0)), EINVAL);
  ASSERT_TRUE(client_->SetXattr(dir, kRanksXattr, "2\n", 0).ok());
  ASSERT_TRUE(client_->SetXattr(dir, kRanksXattr, "2", 0).ok());  // same N: fine
  EXPECT_EQ(Errno(client_->SetXattr(dir, kRanksXattr, "3", 0)), EINVAL);
  EXPECT_EQ(Errno(client_->SetXattr(dir, kCommitXattr, "2", 0)), EINVAL);  // rank >= N
  EXPECT_EQ(Errno(client_->SetXattr(kRootIno, kRanksXattr, "1", 0)), EINVAL);
  auto nested = client_->Mkdir(dir, "inner", 0755, 0, 0);
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(Errno(client_->SetXattr(nested->ino(), kRanksXattr, "1", 0)), EINVAL);
  // Read-only names cannot be set; other reserved names are the service's.
  EXPECT_EQ(Errno(client_->SetXattr(dir, kStateXattr, "committed", 0)), EINVAL);
  EXPECT_EQ(Errno(client_->SetXattr(dir, "user.ckptfs.bogus", "1", 0)), EINVAL);
  EXPECT_EQ(*client_->GetXattr(dir, kRanksXattr), "2");
}

TEST_F(CheckpointClientTest, ReadSideXattrs) {
  EXPECT_EQ(ErrnoFromStatus(client_->GetXattr(run_, kCheckpointsXattr).status()), ENODATA);
  EXPECT_EQ(ErrnoFromStatus(client_->GetXattr(run_, kLatestXattr).status()), ENODATA);
  EXPECT_EQ(ErrnoFromStatus(client_->GetXattr(run_, kStateXattr).status()), ENODATA);
  EXPECT_EQ(ErrnoFromStatus(client_->GetXattr(run_, kCommitXattr).status()), ENODATA);
  const uint64_t a = MakeCheckpointDir("a");
  const uint64_t b = MakeCheckpointDir("b");
  ASSERT_TRUE(client_->SetXattr(b, kRanksXattr, "2", 0).ok());
  ASSERT_TRUE(client_->SetXattr(a, kRanksXattr, "1", 0).ok());
  EXPECT_EQ(*client_->GetXattr(b, kStateXattr), "pending");
  EXPECT_EQ(*client_->GetXattr(b, kRanksXattr), "2");
  WriteFile(a, "f", "12345");
  ASSERT_TRUE(client_->SetXattr(a, kCommitXattr, "0", 0).ok());
  EXPECT_EQ(*client_->GetXattr(a, kStateXattr), "committed");
  EXPECT_EQ(*client_->GetXattr(run_, kLatestXattr), "a");

  auto info = ParseCheckpointInfo(*client_->GetXattr(a, kInfoXattr));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name(), "a");
  EXPECT_EQ(info->state(), meta::COMMITTED);
  EXPECT_EQ(info->files(), 1u);
  EXPECT_EQ(info->bytes(), 5u);
  EXPECT_GT(info->ended_ms(), 0);

  const std::string list = *client_->GetXattr(run_, kCheckpointsXattr);
  std::vector<std::string> lines = absl::StrSplit(list, '\n');
  ASSERT_EQ(lines.size(), 3u) << list;  // two lines, each ending in "\n"
  EXPECT_EQ(lines[2], "");
  EXPECT_EQ(ParseCheckpointInfo(lines[0])->name(), "a");
  EXPECT_EQ(ParseCheckpointInfo(lines[1])->name(), "b");
  EXPECT_EQ(ParseCheckpointInfo(lines[1])->state(), meta::PENDING);
  // Listing the run directory shows the committed checkpoint only.
  auto listed = client_->ReadDir(run_, "", 100);
  ASSERT_TRUE(listed.ok());
  std::vector<std::string> names;
  for (const meta::DirEntry& entry : listed->entries()) names.push_back(entry.name());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "latest"}));
}

TEST_F(CheckpointClientTest, GetxattrOfCommitRankCommits) {
  const uint64_t dir = MakeCheckpointDir("by-read");
  ASSERT_TRUE(client_->DeclareCheckpoint(dir, 2).ok());
  EXPECT_EQ(Errno(client_->GetXattr(dir, "user.ckptfs.commit.x").status()), EINVAL);
  EXPECT_EQ(Errno(client_->GetXattr(dir, "user.ckptfs.commit.2").status()), EINVAL);
  EXPECT_EQ(Errno(client_->SetXattr(dir, "user.ckptfs.commit.0", "", 0)), EINVAL);
  absl::StatusOr<std::string> rank0;
  std::thread waiter([&] { rank0 = client_->GetXattr(dir, "user.ckptfs.commit.0"); });
  WaitForArrivals(dir, 1);
  EXPECT_EQ(*client_->GetXattr(dir, kStateXattr), "pending");
  absl::StatusOr<std::string> rank1 = client_->GetXattr(dir, "user.ckptfs.commit.1");
  waiter.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ(*rank0, "committed");
  EXPECT_EQ(*rank1, "committed");
}

TEST_F(CheckpointClientTest, RemoveXattrRemovesTheCheckpoint) {
  const uint64_t a = MakeCheckpointDir("a");
  ASSERT_TRUE(client_->DeclareCheckpoint(a, 1).ok());
  ASSERT_TRUE(client_->CommitCheckpoint(a, 0).ok());
  EXPECT_EQ(Errno(client_->SetXattr(run_, kRemoveXattr, "a/b", 0)), EINVAL);
  EXPECT_EQ(meta_->Calls("RemoveCheckpoint"), 0);
  ASSERT_TRUE(client_->SetXattr(run_, kRemoveXattr, "a\n", 0).ok());
  EXPECT_EQ(Errno(client_->Lookup(run_, "a").status()), ENOENT);
  EXPECT_EQ(Errno(client_->SetXattr(run_, kRemoveXattr, "a", 0)), ENOENT);
}

// "NAME/INO/STATE" removes NAME only while it is still that checkpoint in
// that state: a newer checkpoint that took the name is left alone (ESTALE).
TEST_F(CheckpointClientTest, RemoveXattrWithAnExpectedCheckpointLeavesANewerOneAlone) {
  const uint64_t old_ckpt = MakeCheckpointDir("step");
  ASSERT_TRUE(client_->DeclareCheckpoint(old_ckpt, 1).ok());
  ASSERT_TRUE(client_->CommitCheckpoint(old_ckpt, 0).ok());
  const std::string listed = CheckpointRemovalValue("step", old_ckpt, meta::COMMITTED);
  // Removed and declared again under the same name (a retried step).
  ASSERT_TRUE(client_->SetXattr(run_, kRemoveXattr, "step", 0).ok());
  const uint64_t new_ckpt = MakeCheckpointDir("step");
  ASSERT_TRUE(client_->DeclareCheckpoint(new_ckpt, 1).ok());
  EXPECT_EQ(Errno(client_->SetXattr(run_, kRemoveXattr, listed, 0)), ESTALE);
  EXPECT_TRUE(client_->Lookup(run_, "step").ok());
  // Same inode, another state: also left alone.
  EXPECT_EQ(Errno(client_->SetXattr(run_, kRemoveXattr,
                                    CheckpointRemovalValue("step", new_ckpt, meta::COMMITTED), 0)),
            ESTALE);
  ASSERT_TRUE(client_
                  ->SetXattr(run_, kRemoveXattr,
                             CheckpointRemovalValue("step", new_ckpt, meta::PENDING) + "\n", 0)
                  .ok());
  EXPECT_EQ(Errno(client_->Lookup(run_, "step").status()), ENOENT);
  // Malformed: EINVAL before any call.
  const int calls = meta_->Calls("RemoveCheckpoint");
  for (const char* bad : {"step/0/pending", "step/x/pending", "step/7/done", "step/7", "/7/pending",
                          "step/7/pending/more"}) {
    EXPECT_EQ(Errno(client_->SetXattr(run_, kRemoveXattr, bad, 0)), EINVAL) << bad;
  }
  EXPECT_EQ(meta_->Calls("RemoveCheckpoint"), calls);
}

TEST_F(CheckpointClientTest, CommitRetriesWhileTheServiceIsUnreachable) {
  const uint64_t dir = MakeCheckpointDir("restart");
  ASSERT_TRUE(client_->DeclareCheckpoint(dir, 1).ok());
  meta_->FailNext("CommitCheckpoint",
                  MetaTransportError(absl::StatusCode::kUnavailable, "restarting"), 3);
  auto committed = client_->CommitCheckpoint(dir, 0);
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(committed->state(), meta::COMMITTED);
  EXPECT_EQ(meta_->Calls("CommitCheckpoint"), 4);
}

TEST_F(CheckpointClientTest, ServiceErrorsAreNotRetried) {
  const uint64_t dir = MakeCheckpointDir("aborted");
  ASSERT_TRUE(client_->DeclareCheckpoint(dir, 1).ok());
  // An abort by timeout has the code of a deadline; it is the outcome, not
  // a transport failure to retry.
  meta_->FailNext("CommitCheckpoint", ErrnoStatus(ETIMEDOUT, "rank 0 did not commit"));
  absl::Status status = client_->CommitCheckpoint(dir, 0).status();
  EXPECT_EQ(Errno(status), ETIMEDOUT);
  EXPECT_EQ(status.message(), "rank 0 did not commit");
  EXPECT_EQ(meta_->Calls("CommitCheckpoint"), 1);
}

TEST_F(CheckpointClientTest, GivesUpWhenUnreachablePastTheTimeout) {
  ClientOptions options = DefaultOptions();
  options.commit_poll = absl::Milliseconds(100);
  options.commit_unreachable_slack = absl::Milliseconds(300);
  MakeClient(options);
  auto dir = client_->Mkdir(kRootIno, "c", 0755, 0, 0);
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(client_->DeclareCheckpoint(dir->ino(), 2, /*timeout_s=*/1).ok());
  // The first poll answers (the client learns the 1 s timeout); then the
  // service is gone for good.
  absl::Notification polled;
  std::thread rank0([&] {
    absl::Status status = client_->CommitCheckpoint(dir->ino(), 0).status();
    EXPECT_EQ(ErrnoFromStatus(status), ETIMEDOUT) << status;
    EXPECT_NE(status.message().find("unreachable"), absl::string_view::npos) << status;
    polled.Notify();
  });
  while (meta_->Calls("CommitCheckpoint") < 1) absl::SleepFor(absl::Milliseconds(1));
  meta_->FailNext("CommitCheckpoint", MetaTransportError(absl::StatusCode::kUnavailable, "gone"),
                  1000000);
  rank0.join();
  EXPECT_TRUE(polled.HasBeenNotified());
}

TEST_F(CheckpointClientTest, CancelledCommitReturnsEintrAndCanBeRepeated) {
  const uint64_t dir = MakeCheckpointDir("eintr");
  ASSERT_TRUE(client_->DeclareCheckpoint(dir, 2).ok());
  Cancellation cancel;
  absl::Status interrupted;
  std::thread rank0([&] { interrupted = client_->CommitCheckpoint(dir, 0, &cancel).status(); });
  WaitForArrivals(dir, 1);
  cancel.Cancel();
  rank0.join();
  EXPECT_EQ(Errno(interrupted), EINTR) << interrupted;
  // The retry waits for the same barrier: its commit reaches the service
  // before rank 1's.
  const int commits = meta_->Calls("CommitCheckpoint");
  absl::StatusOr<meta::CheckpointInfo> retried;
  std::thread again([&] { retried = client_->CommitCheckpoint(dir, 0); });
  while (meta_->Calls("CommitCheckpoint") == commits) absl::SleepFor(absl::Milliseconds(2));
  ASSERT_TRUE(client_->CommitCheckpoint(dir, 1).ok());
  again.join();
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->state(), meta::COMMITTED);
}

TEST_F(CheckpointClientTest, CommittedCheckpointIsReadOnlyAndKeepsItsBytes) {
  const uint64_t dir = MakeCheckpointDir("frozen");
  ASSERT_TRUE(client_->DeclareCheckpoint(dir, 1).ok());
  const std::string data = RandomBytes(kTestChunk + 100, 9);
  WriteFile(dir, "model", data);
  ASSERT_TRUE(client_->CommitCheckpoint(dir, 0).ok());
  auto model = client_->Lookup(dir, "model");
  ASSERT_TRUE(model.ok());
  const int trims = transport_->counts().trims;

  EXPECT_EQ(Errno(client_->Create(dir, "new", 0644, 0, 0, O_WRONLY | O_CREAT).status()), EROFS);
  EXPECT_EQ(Errno(client_->Open(model->ino(), O_WRONLY).status()), EROFS);
  EXPECT_EQ(Errno(client_->Open(model->ino(), O_RDONLY | O_TRUNC).status()), EROFS);
  EXPECT_EQ(Errno(client_->Create(dir, "model", 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC).status()),
            EROFS);
  meta::SetAttrRequest truncate;
  truncate.set_ino(model->ino());
  truncate.set_valid(meta::SET_SIZE);
  truncate.set_size(0);
  EXPECT_EQ(Errno(client_->SetAttr(truncate).status()), EROFS);
  EXPECT_EQ(Errno(client_->Rename(run_, "frozen", run_, "moved", false)), EROFS);
  EXPECT_EQ(Errno(client_->SetXattr(dir, "user.x", "1", 0)), EROFS);

  EXPECT_EQ(transport_->counts().trims, trims);  // nothing was trimmed
  EXPECT_TRUE(SameBytes(ReadAll(model->ino()), data));
  EXPECT_TRUE(service_->WriterHandles(model->ino()).empty());

  // Removing names is the one exception (frameworks delete their old
  // checkpoints themselves): the first removal makes the checkpoint
  // `removing` and takes `latest` off it, and nothing in it becomes
  // writable.
  ASSERT_TRUE(client_->Unlink(dir, "model").ok());
  EXPECT_EQ(*client_->GetXattr(dir, kStateXattr), "removing");
  EXPECT_EQ(ErrnoFromStatus(client_->GetXattr(run_, kLatestXattr).status()), ENODATA);
  EXPECT_EQ(Errno(client_->Create(dir, "model", 0644, 0, 0, O_WRONLY | O_CREAT).status()), EROFS);
  EXPECT_EQ(transport_->counts().trims, trims);
}

}  // namespace
}  // namespace ckptfs::client
