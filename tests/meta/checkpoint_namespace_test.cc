// Checkpoints in the namespace: declaring (what is refused and what is
// marked), inheritance of in_checkpoint, rename across checkpoint
// boundaries, writer registration and damaged files, the immutability of
// ended checkpoints for every mutating operation but removal, readdir hiding,
// and the reserved user.ckptfs. xattrs.
#include <cerrno>

#include "gtest/gtest.h"
#include "server/meta/checkpoint/xattr_rules.h"
#include "tests/meta/checkpoint_test_util.h"

namespace ckptfs::meta {
namespace {

using CheckpointNamespaceTest = CheckpointFixture;

TEST(CheckpointXattrRulesTest, PositiveDecimalsOnly) {
  EXPECT_EQ(ParsePositiveDecimal("8"), 8u);
  EXPECT_EQ(ParsePositiveDecimal("8\n"), 8u);
  EXPECT_EQ(ParsePositiveDecimal("4294967295"), 4294967295u);
  for (const char* bad : {"", "0", "-1", "8x", "abc", " 8", "8\n\n", "+8", "4294967296"}) {
    EXPECT_FALSE(ParsePositiveDecimal(bad).has_value()) << bad;
  }
}

TEST_F(CheckpointNamespaceTest, DeclareRefusesBadRequestsAndChangesNothing) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "step-1");
  EXPECT_ERRNO(Declare(ckpt, 0), EINVAL);
  EXPECT_ERRNO(Declare(ckpt, kMaxCheckpointRanks + 1), EINVAL);
  EXPECT_ERRNO(Declare(kRootIno, 4), EINVAL);
  EXPECT_ERRNO(Declare(12345, 4), ENOENT);
  const uint64_t file = File(run, "notes.txt");
  EXPECT_ERRNO(Declare(file, 4), ENOTDIR);
  EXPECT_FALSE(Inode(ckpt).has_checkpoint());
  EXPECT_ERRNO(ckpts_->Get(ckpt), EINVAL);

  auto declared = Declare(ckpt, 4);
  ASSERT_TRUE(declared.ok()) << declared.status();
  EXPECT_EQ(declared->state(), PENDING);
  EXPECT_EQ(declared->ranks(), 4u);
  EXPECT_EQ(declared->name(), "step-1");
  EXPECT_EQ(declared->timeout_s(), 600u);
  // Same N: harmless; another N: refused, the declaration stays.
  auto again = Declare(ckpt, 4);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->declared_ms(), declared->declared_ms());
  EXPECT_ERRNO(Declare(ckpt, 5), EINVAL);
  EXPECT_EQ(ckpts_->Get(ckpt)->ranks(), 4u);

  // Checkpoints do not nest, in either direction.
  const uint64_t inner = Dir(ckpt, "inner");
  EXPECT_ERRNO(Declare(inner, 1), EINVAL);
  EXPECT_ERRNO(Declare(run, 1), EINVAL);
  EXPECT_FALSE(Inode(run).has_checkpoint());
}

TEST_F(CheckpointNamespaceTest, DeclareMarksTheSubtreeAndNewInodesInherit) {
  const uint64_t ckpt = Dir(kRootIno, "ckpt");
  const uint64_t sub = Dir(ckpt, "sub");
  const uint64_t before = File(sub, "before.pt");
  ASSERT_OK(Declare(ckpt, 2));
  EXPECT_EQ(Inode(sub).in_checkpoint(), ckpt);
  EXPECT_EQ(Inode(before).in_checkpoint(), ckpt);
  EXPECT_EQ(Inode(ckpt).in_checkpoint(), 0u);

  const uint64_t after = File(ckpt, "after.pt");
  const uint64_t deeper = Dir(sub, "deeper");
  SymlinkRequest symlink;
  symlink.set_parent(deeper);
  symlink.set_name("link");
  symlink.set_target("../before.pt");
  auto link = ns_->Symlink(symlink);
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_EQ(Inode(after).in_checkpoint(), ckpt);
  EXPECT_EQ(Inode(deeper).in_checkpoint(), ckpt);
  EXPECT_EQ(Inode(link->ino()).in_checkpoint(), ckpt);
  EXPECT_EQ(Inode(File(kRootIno, "outside.pt")).in_checkpoint(), 0u);
}

TEST_F(CheckpointNamespaceTest, TimeoutComesFromRequestDirectoryParentOrDefault) {
  const uint64_t run = Dir(kRootIno, "run");
  SetXattrRequest set;
  set.set_ino(run);
  set.set_name(std::string(kCommitTimeoutXattr));
  set.set_value("30");
  ASSERT_OK(ns_->SetXattr(set));
  const uint64_t a = Dir(run, "a"), b = Dir(run, "b"), c = Dir(run, "c");
  set.set_ino(b);
  set.set_value("7\n");
  ASSERT_OK(ns_->SetXattr(set));
  EXPECT_EQ(Declare(a, 1)->timeout_s(), 30u);                    // the parent's
  EXPECT_EQ(Declare(b, 1)->timeout_s(), 7u);                     // its own
  EXPECT_EQ(Declare(c, 1, 3)->timeout_s(), 3u);                  // the request's
  EXPECT_EQ(Declare(Dir(kRootIno, "d"), 1)->timeout_s(), 600u);  // the service's
}

TEST_F(CheckpointNamespaceTest, FilesRenamedAcrossTheBoundaryChangeCheckpointDirectoriesCannot) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "ckpt");
  ASSERT_OK(Declare(ckpt, 1));
  const uint64_t file = File(run, "staged.pt");
  ASSERT_OK(Rename(run, "staged.pt", ckpt, "model.pt"));
  EXPECT_EQ(Inode(file).in_checkpoint(), ckpt);
  ASSERT_OK(Rename(ckpt, "model.pt", run, "back.pt"));
  EXPECT_EQ(Inode(file).in_checkpoint(), 0u);

  const uint64_t dir = Dir(run, "shards");
  EXPECT_ERRNO(Rename(run, "shards", ckpt, "shards"), EXDEV);
  EXPECT_EQ(Inode(dir).parent(), run);
  const uint64_t inside = Dir(ckpt, "inside");
  EXPECT_ERRNO(Rename(ckpt, "inside", run, "inside"), EXDEV);
  // Within one checkpoint, and renaming the pending checkpoint itself: fine.
  const uint64_t sub = Dir(ckpt, "sub");
  ASSERT_OK(Rename(ckpt, "inside", sub, "inside"));
  EXPECT_EQ(Inode(inside).in_checkpoint(), ckpt);
  ASSERT_OK(Rename(run, "ckpt", run, "step-2"));
  EXPECT_EQ(ckpts_->Get(ckpt)->name(), "step-2");
  // A checkpoint does not move into another one.
  const uint64_t other = Dir(run, "other");
  ASSERT_OK(Declare(other, 1));
  EXPECT_ERRNO(Rename(run, "step-2", other, "step-2"), EXDEV);
}

// An exclusive create whose reply was lost, sent again by the same handle
// (the same writer id): answered as the first attempt was, so the handle
// owns the one registration and releases it; another writer, or none, still
// gets EEXIST and registers nothing.
TEST_F(CheckpointNamespaceTest, RetriedExclusiveCreateKeepsOneReleasableRegistration) {
  CreateRequest create;
  create.set_parent(kRootIno);
  create.set_name("f");
  create.set_mode(0644);
  create.set_exclusive(true);
  create.set_writer_handle(33);
  auto first = ns_->Create(create);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->created());
  const uint64_t ino = first->attr().ino();
  auto retried = ns_->Create(create);  // the first reply was lost
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_TRUE(retried->created());
  EXPECT_EQ(retried->attr().ino(), ino);
  ASSERT_EQ(Inode(ino).writer_handles_size(), 1);

  create.set_writer_handle(44);
  EXPECT_ERRNO(ns_->Create(create), EEXIST);
  create.set_writer_handle(0);
  EXPECT_ERRNO(ns_->Create(create), EEXIST);
  ASSERT_EQ(Inode(ino).writer_handles_size(), 1);

  CommitWriteRequest close;
  close.set_ino(ino);
  close.set_release_writer(33);
  ASSERT_OK(ns_->CommitWrite(close));
  EXPECT_EQ(Inode(ino).writer_handles_size(), 0);
  // Released, the id is nobody's: a create with it is a plain EEXIST.
  create.set_writer_handle(33);
  EXPECT_ERRNO(ns_->Create(create), EEXIST);
  EXPECT_EQ(Inode(ino).writer_handles_size(), 0);
}

TEST_F(CheckpointNamespaceTest, WritersAreRegisteredAndReleased) {
  CreateRequest create;
  create.set_parent(kRootIno);
  create.set_name("f");
  create.set_mode(0644);
  create.set_writer_handle(11);
  auto created = ns_->Create(create);
  ASSERT_TRUE(created.ok()) << created.status();
  const uint64_t ino = created->attr().ino();
  OpenRequest open;
  open.set_ino(ino);
  open.set_writer_handle(22);
  ASSERT_OK(ns_->Open(open));
  ASSERT_OK(ns_->Open(open));  // twice: harmless
  create.set_writer_handle(11);
  ASSERT_OK(ns_->Create(create));  // the existing file, same writer again
  EXPECT_EQ(Inode(ino).writer_handles_size(), 2);

  CommitWriteRequest commit;
  commit.set_ino(ino);
  commit.set_size(100);
  commit.set_release_writer(11);
  ASSERT_OK(ns_->CommitWrite(commit));
  ASSERT_OK(ns_->CommitWrite(commit));  // released twice: harmless
  ASSERT_EQ(Inode(ino).writer_handles_size(), 1);
  EXPECT_EQ(Inode(ino).writer_handles(0), 22u);
  EXPECT_EQ(Inode(ino).attr().size(), 100u);

  commit.set_release_writer(22);
  commit.set_failed(true);
  ASSERT_OK(ns_->CommitWrite(commit));
  EXPECT_EQ(Inode(ino).writer_handles_size(), 0);
  EXPECT_TRUE(Inode(ino).damaged());
  // Truncation to 0 (O_TRUNC, or truncate) gives the file a fresh start.
  open.set_writer_handle(0);
  open.set_truncate(true);
  ASSERT_OK(ns_->Open(open));
  EXPECT_FALSE(Inode(ino).damaged());
  commit.set_release_writer(0);
  ASSERT_OK(ns_->CommitWrite(commit));
  EXPECT_TRUE(Inode(ino).damaged());
  SetAttrRequest truncate;
  truncate.set_ino(ino);
  truncate.set_valid(SET_SIZE);
  truncate.set_size(10);
  ASSERT_OK(ns_->SetAttr(truncate));
  EXPECT_TRUE(Inode(ino).damaged());
  truncate.set_size(0);
  ASSERT_OK(ns_->SetAttr(truncate));
  EXPECT_FALSE(Inode(ino).damaged());
}

TEST_F(CheckpointNamespaceTest, ReleasingAWriterThatWroteNothingKeepsTheTimes) {
  CreateRequest create;
  create.set_parent(kRootIno);
  create.set_name("f");
  create.set_mode(0644);
  create.set_writer_handle(11);
  auto created = ns_->Create(create);
  ASSERT_TRUE(created.ok()) << created.status();
  const uint64_t ino = created->attr().ino();
  CommitWriteRequest wrote;
  wrote.set_ino(ino);
  wrote.set_size(100);
  wrote.set_mtime_ns(12345);
  ASSERT_OK(ns_->CommitWrite(wrote));
  const Attr before = Inode(ino).attr();

  CommitWriteRequest release;  // size 0, mtime 0: a close without writes
  release.set_ino(ino);
  release.set_release_writer(11);
  ASSERT_OK(ns_->CommitWrite(release));
  const InodeRecord after = Inode(ino);
  EXPECT_EQ(after.writer_handles_size(), 0);
  EXPECT_EQ(after.attr().mtime_ns(), before.mtime_ns());
  EXPECT_EQ(after.attr().ctime_ns(), before.ctime_ns());
  EXPECT_EQ(after.attr().size(), 100u);
}

TEST_F(CheckpointNamespaceTest, EndedCheckpointsAreImmutable) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t committed = Dir(run, "committed");
  const uint64_t sub = Dir(committed, "sub");
  ASSERT_OK(Declare(committed, 1));
  const uint64_t file = File(sub, "model.pt");
  const uint64_t staged = File(run, "staged.pt");
  auto info = CommitAll(committed, 1);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->state(), COMMITTED);
  const InodeRecord file_before = Inode(file);
  const int64_t versions_before = Version(file) + Version(sub) + Version(committed);

  for (uint64_t parent : {committed, sub}) {
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
  reopen.set_truncate(false);
  reopen.set_writer_handle(5);
  EXPECT_ERRNO(ns_->Create(reopen), EROFS);
  reopen.set_writer_handle(0);
  EXPECT_OK(ns_->Create(reopen));  // a plain open of an existing file
  // (Unlink and Rmdir are allowed: checkpoint_removal_test.cc.)
  EXPECT_ERRNO(Rename(sub, "model.pt", sub, "renamed.pt"), EROFS);
  EXPECT_ERRNO(Rename(sub, "model.pt", run, "out.pt"), EROFS);
  EXPECT_ERRNO(Rename(run, "staged.pt", sub, "in.pt"), EROFS);
  EXPECT_ERRNO(Rename(run, "committed", run, "renamed"), EROFS);
  Dir(run, "empty");
  EXPECT_ERRNO(Rename(run, "empty", run, "committed"), EROFS);  // replacing it
  SetAttrRequest setattr;
  setattr.set_ino(file);
  setattr.set_valid(SET_MODE);
  setattr.set_mode(0600);
  EXPECT_ERRNO(ns_->SetAttr(setattr), EROFS);
  setattr.set_valid(SET_SIZE);
  setattr.set_size(0);
  EXPECT_ERRNO(ns_->SetAttr(setattr), EROFS);
  setattr.set_ino(committed);
  setattr.set_valid(SET_MTIME_NOW);
  EXPECT_ERRNO(ns_->SetAttr(setattr), EROFS);
  OpenRequest open;
  open.set_ino(file);
  open.set_writer_handle(9);
  EXPECT_ERRNO(ns_->Open(open), EROFS);
  open.set_writer_handle(0);
  open.set_truncate(true);
  EXPECT_ERRNO(ns_->Open(open), EROFS);
  open.set_truncate(false);
  EXPECT_OK(ns_->Open(open));  // reading is fine
  CommitWriteRequest commit;
  commit.set_ino(file);
  commit.set_size(file_before.attr().size() + 1);
  EXPECT_ERRNO(ns_->CommitWrite(commit), EROFS);
  commit.set_size(0);
  commit.set_failed(true);
  EXPECT_ERRNO(ns_->CommitWrite(commit), EROFS);
  commit.set_failed(false);
  commit.set_release_writer(77);
  EXPECT_OK(ns_->CommitWrite(commit));  // only a release: allowed, changes nothing
  SetXattrRequest setxattr;
  setxattr.set_ino(committed);
  setxattr.set_name("user.tag");
  setxattr.set_value("x");
  EXPECT_ERRNO(ns_->SetXattr(setxattr), EROFS);
  setxattr.set_ino(file);
  EXPECT_ERRNO(ns_->SetXattr(setxattr), EROFS);
  EXPECT_ERRNO(ns_->RemoveXattr(file, "user.tag"), EROFS);
  // Re-declaring with the same N is still harmless.
  EXPECT_OK(Declare(committed, 1));
  EXPECT_ERRNO(Declare(committed, 2), EINVAL);

  // Nothing was written, not even a time.
  EXPECT_EQ(Version(file) + Version(sub) + Version(committed), versions_before);
  // The run directory itself is not inside the checkpoint.
  EXPECT_OK(Rename(run, "staged.pt", run, "staged2.pt"));
  (void)staged;
}

TEST_F(CheckpointNamespaceTest, PendingCheckpointDirectoriesGoOnlyByRemoveCheckpoint) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "ckpt");
  ASSERT_OK(Declare(ckpt, 2));
  EXPECT_ERRNO(ns_->Rmdir(run, "ckpt"), EBUSY);
  Dir(run, "empty");
  EXPECT_ERRNO(Rename(run, "empty", run, "ckpt"), EBUSY);
  // Inside a pending checkpoint everything goes on as usual.
  const uint64_t sub = Dir(ckpt, "sub");
  File(sub, "a.pt");
  EXPECT_OK(Rename(sub, "a.pt", sub, "b.pt"));
  EXPECT_OK(ns_->Unlink(sub, "b.pt"));
  EXPECT_OK(ns_->Rmdir(ckpt, "sub"));
}

TEST_F(CheckpointNamespaceTest, ReadDirHidesPendingAndAbortedCheckpoints) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t committed = Committed(run, "a-committed");
  const uint64_t pending = Dir(run, "b-pending");
  ASSERT_OK(Declare(pending, 2));
  const uint64_t aborted = Dir(run, "c-aborted");
  ASSERT_OK(Declare(aborted, 2));
  ASSERT_OK(ckpts_->Abort(aborted, ECANCELED, "test"));
  Dir(run, "d-plain");
  File(run, "e-file");
  for (char c = 'f'; c <= 'h'; ++c) ASSERT_OK(Declare(Dir(run, std::string(1, c) + "-p"), 1));

  auto all = ns_->ReadDir(run, "", 0);
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> names;
  for (const DirEntry& entry : all->entries()) names.push_back(entry.name());
  EXPECT_EQ(names, (std::vector<std::string>{"a-committed", "d-plain", "e-file", "latest"}));
  EXPECT_FALSE(all->more());
  // Page by page: hidden entries never make an empty page while more follow.
  names.clear();
  std::string after;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = ns_->ReadDir(run, after, 1);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const DirEntry& entry : page->entries()) names.push_back(entry.name());
    if (!page->more()) break;
    ASSERT_EQ(page->entries_size(), 1);
    after = page->entries(0).name();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a-committed", "d-plain", "e-file", "latest"}));
  // Hidden, not gone.
  EXPECT_EQ(ns_->Lookup(run, "b-pending")->ino(), pending);
  EXPECT_EQ(ns_->Lookup(run, "c-aborted")->ino(), aborted);
  EXPECT_EQ(ns_->Lookup(run, "a-committed")->ino(), committed);
}

TEST_F(CheckpointNamespaceTest, ReservedXattrsAreRefusedAndValuesChecked) {
  const uint64_t run = Dir(kRootIno, "run");
  SetXattrRequest set;
  set.set_ino(run);
  for (const char* name : {"user.ckptfs.ranks", "user.ckptfs.commit", "user.ckptfs.remove",
                           "user.ckptfs.state", "user.ckptfs.latest", "user.ckptfs.x"}) {
    set.set_name(name);
    set.set_value("1");
    EXPECT_ERRNO(ns_->SetXattr(set), EINVAL) << name;
    EXPECT_ERRNO(ns_->RemoveXattr(run, name), EINVAL) << name;
  }
  for (absl::string_view name : {kKeepXattr, kCommitTimeoutXattr}) {
    set.set_name(std::string(name));
    for (const char* bad : {"0", "", "-1", "abc", "8x"}) {
      set.set_value(bad);
      EXPECT_ERRNO(ns_->SetXattr(set), EINVAL) << name << "=" << bad;
    }
    set.set_value("3\n");
    EXPECT_OK(ns_->SetXattr(set));
    EXPECT_EQ(*ns_->GetXattr(run, name), "3\n");
    EXPECT_OK(ns_->RemoveXattr(run, name));
  }
  set.set_name("user.other");
  set.set_value("anything");
  EXPECT_OK(ns_->SetXattr(set));
}

}  // namespace
}  // namespace ckptfs::meta
