// Removing a checkpoint with plain unlink and rmdir (shutil.rmtree): the
// first removal inside a COMMITTED checkpoint makes it REMOVING and moves
// `latest` off it in the same transaction; everything but removal stays
// EROFS; the directory itself goes by rmdir once empty (not while pending);
// removed files become orphans as anywhere; retention finishes REMOVING
// checkpoints and never counts them as committed.
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/meta/meta_txn.h"
#include "tests/meta/checkpoint_test_util.h"

namespace ckptfs::meta {
namespace {

class CheckpointRemovalTest : public CheckpointFixture {
 protected:
  void SetUp() override {
    options_.orphan_grace = absl::Minutes(5);
    CheckpointFixture::SetUp();
  }

  std::string LatestOf(uint64_t run) {
    auto latest = ns_->Lookup(run, "latest");
    if (!latest.ok()) return "<none>";
    auto target = ns_->ReadLink(latest->ino());
    return target.ok() ? *target : "<not a symlink>";
  }
  CheckpointState StateOf(uint64_t ckpt) {
    auto info = ckpts_->Get(ckpt);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->state() : CHECKPOINT_STATE_UNSPECIFIED;
  }
  std::vector<std::string> Listed(uint64_t dir) {
    std::vector<std::string> names;
    auto page = ns_->ReadDir(dir, "", 0);
    EXPECT_TRUE(page.ok()) << page.status();
    if (page.ok()) {
      for (const DirEntry& entry : page->entries()) names.push_back(entry.name());
    }
    return names;
  }
  uint64_t Inodes() {
    auto count = CountInodes(store_.get());
    EXPECT_TRUE(count.ok()) << count.status();
    return count.ok() ? *count : 0;
  }
  void SetKeep(uint64_t run, const std::string& keep) {
    SetXattrRequest request;
    request.set_ino(run);
    request.set_name(std::string(kKeepXattr));
    request.set_value(keep);
    ASSERT_OK(ns_->SetXattr(request));
  }
};

TEST_F(CheckpointRemovalTest, TheFirstUnlinkEndsACommittedCheckpointAndMovesLatest) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t older = Committed(run, "step-1");
  clock_.Advance(absl::Seconds(1));
  const uint64_t newer = Dir(run, "step-2");
  ASSERT_OK(Declare(newer, 1));
  const uint64_t sub = Dir(newer, "shards");
  const uint64_t model = File(newer, "model.pt");
  const uint64_t shard = File(sub, "0.pt");
  ASSERT_EQ(CommitAll(newer, 1)->state(), COMMITTED);
  ASSERT_EQ(LatestOf(run), "step-2");
  const uint64_t latest_link = ns_->Lookup(run, "latest")->ino();
  clock_.Advance(absl::Seconds(1));

  ASSERT_OK(ns_->Unlink(newer, "model.pt"));
  auto info = ckpts_->Get(newer);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state(), REMOVING);
  EXPECT_EQ(info->removing_ms(), absl::ToUnixMillis(clock_.Now()));
  EXPECT_NE(info->ended_ms(), 0);  // when it committed, still
  EXPECT_EQ(LatestOf(run), "step-1");
  EXPECT_NE(ns_->Lookup(run, "latest")->ino(), latest_link);  // a new symlink
  EXPECT_ERRNO(ns_->GetAttr(latest_link), ENOENT);
  auto list = ckpts_->List(run);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->latest(), "step-1");
  // Hidden from the run directory's listing, found by name.
  EXPECT_EQ(Listed(run), (std::vector<std::string>{"latest", "step-1"}));
  EXPECT_EQ(ns_->Lookup(run, "step-2")->ino(), newer);
  // The file is an orphan as after any unlink: still readable by its
  // handles until the orphan grace has passed.
  auto orphan = Orphan(model);
  ASSERT_TRUE(orphan.ok() && orphan->has_value());
  EXPECT_EQ((*orphan)->reclaim_after_ms(),
            absl::ToUnixMillis(clock_.Now() + options_.orphan_grace));
  EXPECT_EQ(ns_->GetAttr(model)->nlink(), 0u);

  // The rest goes as shutil.rmtree removes it; the state stays REMOVING and
  // latest stays on step-1.
  ASSERT_OK(ns_->Unlink(sub, "0.pt"));
  ASSERT_TRUE(Orphan(shard)->has_value());
  ASSERT_OK(ns_->Rmdir(newer, "shards"));
  EXPECT_EQ(StateOf(newer), REMOVING);
  ASSERT_OK(ns_->Rmdir(run, "step-2"));
  EXPECT_ERRNO(ns_->Lookup(run, "step-2"), ENOENT);
  EXPECT_EQ(LatestOf(run), "step-1");
  EXPECT_EQ(StateOf(older), COMMITTED);
  EXPECT_EQ(Listed(run), (std::vector<std::string>{"latest", "step-1"}));
}

TEST_F(CheckpointRemovalTest, LatestGoesWhenNoOtherCheckpointIsCommitted) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t aborted = Dir(run, "aborted");
  ASSERT_OK(Declare(aborted, 1));
  ASSERT_OK(ckpts_->Abort(aborted, EIO, "test"));
  const uint64_t pending = Dir(run, "pending");
  ASSERT_OK(Declare(pending, 2));
  const uint64_t only = Committed(run, "only");
  ASSERT_EQ(LatestOf(run), "only");
  const uint64_t before = Inodes();
  ASSERT_OK(ns_->Unlink(only, "model.pt"));
  EXPECT_EQ(StateOf(only), REMOVING);
  EXPECT_EQ(LatestOf(run), "<none>");
  EXPECT_EQ(ckpts_->List(run)->latest(), "");
  // The symlink's inode went; the unlinked file's stays until reclaimed.
  EXPECT_EQ(Inodes(), before - 1);
}

TEST_F(CheckpointRemovalTest, RmdirOfASubdirectoryEndsTheCheckpointToo) {
  const uint64_t run = Dir(kRootIno, "run");
  Committed(run, "a");
  clock_.Advance(absl::Seconds(1));
  const uint64_t ckpt = Dir(run, "b");
  ASSERT_OK(Declare(ckpt, 1));
  Dir(ckpt, "empty");
  ASSERT_EQ(CommitAll(ckpt, 1)->state(), COMMITTED);
  ASSERT_EQ(LatestOf(run), "b");
  ASSERT_OK(ns_->Rmdir(ckpt, "empty"));
  EXPECT_EQ(StateOf(ckpt), REMOVING);
  EXPECT_EQ(LatestOf(run), "a");
}

TEST_F(CheckpointRemovalTest, AFailedRemovalChangesNothing) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "a");
  ASSERT_OK(Declare(ckpt, 1));
  const uint64_t sub = Dir(ckpt, "sub");
  File(sub, "model.pt");
  ASSERT_EQ(CommitAll(ckpt, 1)->state(), COMMITTED);
  const int64_t version = Version(ckpt);
  EXPECT_ERRNO(ns_->Unlink(ckpt, "absent"), ENOENT);
  EXPECT_ERRNO(ns_->Unlink(ckpt, "sub"), EISDIR);
  EXPECT_ERRNO(ns_->Rmdir(ckpt, "sub"), ENOTEMPTY);
  EXPECT_ERRNO(ns_->Rmdir(run, "a"), ENOTEMPTY);
  EXPECT_EQ(Version(ckpt), version);
  EXPECT_EQ(StateOf(ckpt), COMMITTED);
  EXPECT_EQ(LatestOf(run), "a");
}

TEST_F(CheckpointRemovalTest, EverythingButRemovalStaysReadOnly) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "ckpt");
  ASSERT_OK(Declare(ckpt, 1));
  const uint64_t sub = Dir(ckpt, "sub");
  const uint64_t file = File(sub, "model.pt");
  File(ckpt, "extra.pt");
  const uint64_t staged = File(run, "staged.pt");
  ASSERT_EQ(CommitAll(ckpt, 1)->state(), COMMITTED);
  ASSERT_OK(ns_->Unlink(ckpt, "extra.pt"));
  ASSERT_EQ(StateOf(ckpt), REMOVING);
  const int64_t versions = Version(file) + Version(sub) + Version(ckpt);

  for (uint64_t parent : {ckpt, sub}) {
    CreateRequest create;
    create.set_parent(parent);
    create.set_name("new.pt");
    create.set_mode(0644);
    EXPECT_ERRNO(ns_->Create(create), EROFS);
    EXPECT_ERRNO(MakeDir(parent, "newdir"), EROFS);
    SymlinkRequest symlink;
    symlink.set_parent(parent);
    symlink.set_name("link");
    symlink.set_target("x");
    EXPECT_ERRNO(ns_->Symlink(symlink), EROFS);
  }
  CreateRequest reopen;
  reopen.set_parent(sub);
  reopen.set_name("model.pt");
  reopen.set_truncate(true);
  EXPECT_ERRNO(ns_->Create(reopen), EROFS);
  EXPECT_ERRNO(Rename(sub, "model.pt", sub, "renamed.pt"), EROFS);
  EXPECT_ERRNO(Rename(sub, "model.pt", run, "out.pt"), EROFS);
  EXPECT_ERRNO(Rename(run, "staged.pt", sub, "in.pt"), EROFS);
  EXPECT_ERRNO(Rename(run, "ckpt", run, "renamed"), EROFS);
  Dir(run, "empty");
  EXPECT_ERRNO(Rename(run, "empty", run, "ckpt"), EROFS);
  SetAttrRequest setattr;
  setattr.set_ino(file);
  setattr.set_valid(SET_MODE);
  setattr.set_mode(0600);
  absl::Status chmod = ns_->SetAttr(setattr).status();
  EXPECT_EQ(ErrnoOf(chmod), EROFS);
  EXPECT_TRUE(absl::StrContains(chmod.message(), "being removed")) << chmod;
  setattr.set_valid(SET_SIZE);
  setattr.set_size(0);
  EXPECT_ERRNO(ns_->SetAttr(setattr), EROFS);
  OpenRequest open;
  open.set_ino(file);
  open.set_writer_handle(9);
  EXPECT_ERRNO(ns_->Open(open), EROFS);
  open.set_writer_handle(0);
  EXPECT_OK(ns_->Open(open));  // reading is fine
  CommitWriteRequest commit;
  commit.set_ino(file);
  commit.set_size(5000);
  EXPECT_ERRNO(ns_->CommitWrite(commit), EROFS);
  SetXattrRequest setxattr;
  setxattr.set_ino(ckpt);
  setxattr.set_name("user.tag");
  setxattr.set_value("x");
  EXPECT_ERRNO(ns_->SetXattr(setxattr), EROFS);
  setxattr.set_ino(file);
  EXPECT_ERRNO(ns_->SetXattr(setxattr), EROFS);
  EXPECT_ERRNO(ns_->RemoveXattr(file, "user.tag"), EROFS);
  EXPECT_EQ(Version(file) + Version(sub) + Version(ckpt), versions);

  // Never committed again: a commit (a retried rank) says it is gone.
  EXPECT_OK(Declare(ckpt, 1));  // the same N: harmless
  auto again = CommitAll(ckpt, 1);
  EXPECT_EQ(ErrnoOf(again), ENOENT) << again.status();
  EXPECT_EQ(StateOf(ckpt), REMOVING);
  (void)staged;
}

TEST_F(CheckpointRemovalTest, EndedCheckpointDirectoriesGoByRmdirOncePendingOnesDoNot) {
  const uint64_t run = Dir(kRootIno, "run");
  Committed(run, "a");
  clock_.Advance(absl::Seconds(1));
  // An empty committed checkpoint: rmdir ends it and moves latest.
  const uint64_t empty = Dir(run, "empty");
  ASSERT_OK(Declare(empty, 1));
  ASSERT_EQ(CommitAll(empty, 1)->state(), COMMITTED);
  ASSERT_EQ(LatestOf(run), "empty");
  const uint64_t run_nlink = ns_->GetAttr(run)->nlink();
  ASSERT_OK(ns_->Rmdir(run, "empty"));
  EXPECT_ERRNO(ns_->Lookup(run, "empty"), ENOENT);
  EXPECT_EQ(LatestOf(run), "a");
  EXPECT_EQ(ns_->GetAttr(run)->nlink(), run_nlink - 1);
  // An aborted one (emptied by its abort).
  const uint64_t aborted = Dir(run, "aborted");
  ASSERT_OK(Declare(aborted, 1));
  File(aborted, "partial.pt");
  ASSERT_OK(ckpts_->Abort(aborted, EIO, "test"));
  ASSERT_OK(ns_->Rmdir(run, "aborted"));
  EXPECT_ERRNO(ns_->Lookup(run, "aborted"), ENOENT);
  // A pending one: EBUSY, even empty; inside it, removal is as anywhere.
  const uint64_t pending = Dir(run, "pending");
  ASSERT_OK(Declare(pending, 2));
  File(pending, "x.pt");
  ASSERT_OK(ns_->Unlink(pending, "x.pt"));
  EXPECT_EQ(StateOf(pending), PENDING);
  absl::Status busy = ns_->Rmdir(run, "pending");
  EXPECT_EQ(ErrnoOf(busy), EBUSY);
  EXPECT_TRUE(absl::StrContains(busy.message(), "ckptfs ckpt rm")) << busy;
  EXPECT_EQ(StateOf(pending), PENDING);
  EXPECT_EQ(LatestOf(run), "a");
}

TEST_F(CheckpointRemovalTest, RmdirOfTheLastCommittedCheckpointCountsBothInodes) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "only");
  ASSERT_OK(Declare(ckpt, 1));
  ASSERT_EQ(CommitAll(ckpt, 1)->state(), COMMITTED);
  ASSERT_EQ(LatestOf(run), "only");
  const uint64_t before = Inodes();
  ASSERT_OK(ns_->Rmdir(run, "only"));  // the directory and the latest symlink
  EXPECT_EQ(LatestOf(run), "<none>");
  EXPECT_EQ(Inodes(), before - 2);
}

TEST_F(CheckpointRemovalTest, RetentionFinishesRemovingCheckpointsAndNeverCountsThem) {
  const uint64_t run = Dir(kRootIno, "run");
  SetKeep(run, "2");
  const uint64_t c1 = Committed(run, "c1");
  clock_.Advance(absl::Seconds(1));
  const uint64_t c2 = Committed(run, "c2");
  clock_.Advance(absl::Seconds(1));
  ASSERT_OK(ns_->Unlink(c1, "model.pt"));
  ASSERT_EQ(StateOf(c1), REMOVING);
  clock_.Advance(absl::Seconds(1));
  // c3 commits: c2 and c3 are the two committed ones (c1 is not counted);
  // c1's removal began a moment ago, so its remover is left to finish.
  const uint64_t c3 = Committed(run, "c3");
  auto removed = ckpts_->Retain(c3);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(removed->empty());
  EXPECT_EQ(StateOf(c1), REMOVING);
  EXPECT_EQ(StateOf(c2), COMMITTED);
  // Once the grace has passed, retention removes it (this call, or the
  // one c3's commit started, whichever comes first).
  clock_.Advance(ckpts_->options().removing_grace);
  removed = ckpts_->Retain(c3);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_LE(removed->size(), 1u);
  EXPECT_ERRNO(ns_->Lookup(run, "c1"), ENOENT);
  EXPECT_EQ(StateOf(c2), COMMITTED);
  EXPECT_EQ(LatestOf(run), "c3");
  // RemoveCheckpoint takes a REMOVING one by its state too.
  ASSERT_OK(ns_->Unlink(c2, "model.pt"));
  const CheckpointStore::RemoveOnly stale{c2, COMMITTED};
  EXPECT_ERRNO(ckpts_->Remove(run, "c2", &stale), ESTALE);
  const CheckpointStore::RemoveOnly only{c2, REMOVING};
  EXPECT_OK(ckpts_->Remove(run, "c2", &only).status());
  EXPECT_EQ(LatestOf(run), "c3");
}

}  // namespace
}  // namespace ckptfs::meta
