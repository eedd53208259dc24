// POSIX semantics the metadata service keeps: Link counts names and a
// removal takes one name, not the inode; rename over and between hard links;
// Mknod's FIFOs, sockets and device nodes; the set-id clearing of SetAttr;
// the group a set-group-ID directory gives new inodes; and the checkpoint
// rule for links (a link within one checkpoint or outside
// all of them, out of an ended one to outside every checkpoint; EXDEV
// otherwise), with removal and retention keeping what another name reaches.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>

#include "gtest/gtest.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/keys.h"
#include "tests/meta/checkpoint_test_util.h"

namespace ckptfs::meta {
namespace {

class PosixSemanticsTest : public CheckpointFixture {
 protected:
  absl::StatusOr<Attr> Link(uint64_t ino, uint64_t parent, const std::string& name) {
    LinkRequest request;
    request.set_ino(ino);
    request.set_new_parent(parent);
    request.set_new_name(name);
    return ns_->Link(request);
  }

  absl::StatusOr<Attr> Mknod(uint64_t parent, const std::string& name, uint32_t mode,
                             uint64_t rdev = 0) {
    MknodRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_mode(mode);
    request.set_rdev(rdev);
    request.set_uid(1000);
    request.set_gid(1000);
    return ns_->Mknod(request);
  }

  uint32_t Nlink(uint64_t ino) {
    auto attr = ns_->GetAttr(ino);
    EXPECT_TRUE(attr.ok()) << attr.status();
    return attr.ok() ? attr->nlink() : 0;
  }

  bool IsOrphan(uint64_t ino) {
    auto orphan = Orphan(ino);
    EXPECT_TRUE(orphan.ok()) << orphan.status();
    return orphan.ok() && orphan->has_value();
  }
};

TEST_F(PosixSemanticsTest, LinkCountsNamesAndUnlinkTakesOneName) {
  const uint64_t a = Dir(kRootIno, "a");
  const uint64_t b = Dir(kRootIno, "b");
  const uint64_t file = File(a, "f", 4096);
  const Attr before = *ns_->GetAttr(file);
  const Attr dir_before = *ns_->GetAttr(b);
  clock_.Advance(absl::Seconds(1));

  auto linked = Link(file, b, "g");
  ASSERT_OK(linked);
  EXPECT_EQ(linked->ino(), file);
  EXPECT_EQ(linked->nlink(), 2u);
  EXPECT_GT(linked->ctime_ns(), before.ctime_ns());
  EXPECT_EQ(linked->mtime_ns(), before.mtime_ns());
  EXPECT_GT(ns_->GetAttr(b)->mtime_ns(), dir_before.mtime_ns());
  EXPECT_GT(ns_->GetAttr(b)->ctime_ns(), dir_before.ctime_ns());
  EXPECT_EQ(ns_->Lookup(b, "g")->ino(), file);
  EXPECT_EQ(ns_->GetAttr(b)->nlink(), 2u);  // a file adds no ".."

  clock_.Advance(absl::Seconds(1));
  ASSERT_OK(ns_->Unlink(a, "f"));
  EXPECT_EQ(Nlink(file), 1u);
  EXPECT_GT(ns_->GetAttr(file)->ctime_ns(), linked->ctime_ns());
  EXPECT_FALSE(IsOrphan(file));
  EXPECT_EQ(ns_->GetAttr(file)->size(), 4096u);
  EXPECT_ERRNO(ns_->Lookup(a, "f"), ENOENT);

  ASSERT_OK(ns_->Unlink(b, "g"));
  EXPECT_EQ(Nlink(file), 0u);
  EXPECT_TRUE(IsOrphan(file));
}

TEST_F(PosixSemanticsTest, LinkRefusesWhatLinkTwoRefuses) {
  const uint64_t dir = Dir(kRootIno, "d");
  const uint64_t file = File(kRootIno, "f");
  EXPECT_ERRNO(Link(dir, kRootIno, "d2"), EPERM);
  EXPECT_ERRNO(Link(file, kRootIno, "d"), EEXIST);
  EXPECT_ERRNO(Link(file, kRootIno, "f"), EEXIST);
  EXPECT_ERRNO(Link(999999, kRootIno, "x"), ENOENT);
  EXPECT_ERRNO(Link(file, file, "x"), ENOTDIR);
  EXPECT_ERRNO(Link(file, 999999, "x"), ESTALE);
  EXPECT_ERRNO(Link(file, kRootIno, ""), EINVAL);
  EXPECT_ERRNO(Link(file, kRootIno, std::string(256, 'n')), ENAMETOOLONG);
  EXPECT_EQ(Nlink(file), 1u);
  // An inode whose last name went cannot get a new one.
  ASSERT_OK(ns_->Unlink(kRootIno, "f"));
  EXPECT_ERRNO(Link(file, kRootIno, "again"), ENOENT);
  EXPECT_ERRNO(ns_->Lookup(kRootIno, "again"), ENOENT);
}

TEST_F(PosixSemanticsTest, RenameOverAndBetweenHardLinks) {
  const uint64_t linked = File(kRootIno, "x");
  ASSERT_OK(Link(linked, kRootIno, "y"));
  // Two names of one inode: rename does nothing and both stay.
  ASSERT_OK(Rename(kRootIno, "x", kRootIno, "y"));
  EXPECT_EQ(ns_->Lookup(kRootIno, "x")->ino(), linked);
  EXPECT_EQ(ns_->Lookup(kRootIno, "y")->ino(), linked);
  EXPECT_EQ(Nlink(linked), 2u);
  // Another file renamed over one name: the inode keeps its other name.
  const uint64_t other = File(kRootIno, "z");
  ASSERT_OK(Rename(kRootIno, "z", kRootIno, "y"));
  EXPECT_EQ(ns_->Lookup(kRootIno, "y")->ino(), other);
  EXPECT_EQ(Nlink(linked), 1u);
  EXPECT_FALSE(IsOrphan(linked));
  EXPECT_EQ(ns_->Lookup(kRootIno, "x")->ino(), linked);
}

TEST_F(PosixSemanticsTest, MknodMakesSpecialFilesWithModeOwnerAndDevice) {
  struct Case {
    const char* name;
    uint32_t mode;
    FileType type;
    uint64_t rdev;
  };
  const Case cases[] = {{"fifo", S_IFIFO | 0640, FIFO, 0},
                        {"sock", S_IFSOCK | 0755, SOCKET, 0},
                        {"null", S_IFCHR | 0666, CHAR_DEVICE, makedev(1, 3)},
                        {"disk", S_IFBLK | 0600, BLOCK_DEVICE, makedev(259, 1)}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto node = Mknod(kRootIno, c.name, c.mode, c.rdev);
    ASSERT_OK(node);
    EXPECT_EQ(node->type(), c.type);
    EXPECT_EQ(node->mode(), c.mode);
    EXPECT_EQ(node->uid(), 1000u);
    EXPECT_EQ(node->gid(), 1000u);
    EXPECT_EQ(node->rdev(), c.rdev);
    EXPECT_EQ(node->nlink(), 1u);
    auto found = ns_->Lookup(kRootIno, c.name);
    ASSERT_OK(found);
    EXPECT_EQ(found->mode(), c.mode);
    EXPECT_EQ(found->rdev(), c.rdev);
    EXPECT_ERRNO(Mknod(kRootIno, c.name, c.mode), EEXIST);
    EXPECT_ERRNO(ns_->ReadLink(node->ino()), EINVAL);
  }
  auto page = ns_->ReadDir(kRootIno, "", 0);
  ASSERT_OK(page);
  for (const DirEntry& entry : page->entries()) {
    if (entry.name() == "fifo") {
      EXPECT_EQ(entry.type(), FIFO);
    }
    if (entry.name() == "disk") {
      EXPECT_EQ(entry.type(), BLOCK_DEVICE);
    }
  }
  // A device's rdev is its own; anything else keeps none.
  EXPECT_EQ(Mknod(kRootIno, "fifo2", S_IFIFO | 0600, 77)->rdev(), 0u);
  // Regular files, directories and symlinks have operations of their own.
  for (uint32_t mode : {uint32_t{S_IFREG | 0644}, uint32_t{S_IFDIR | 0755},
                        uint32_t{S_IFLNK | 0777}, uint32_t{0644}}) {
    EXPECT_ERRNO(Mknod(kRootIno, "bad", mode), EINVAL) << std::oct << mode;
  }
  EXPECT_ERRNO(ns_->Lookup(kRootIno, "bad"), ENOENT);
  // A special file takes hard links, and goes whole with its last name.
  const uint64_t fifo = ns_->Lookup(kRootIno, "fifo")->ino();
  ASSERT_OK(Link(fifo, kRootIno, "fifo-link"));
  EXPECT_EQ(Nlink(fifo), 2u);
  ASSERT_OK(ns_->Unlink(kRootIno, "fifo"));
  EXPECT_EQ(Nlink(fifo), 1u);
  ASSERT_OK(ns_->Unlink(kRootIno, "fifo-link"));
  EXPECT_ERRNO(ns_->GetAttr(fifo), ENOENT);
  EXPECT_FALSE(IsOrphan(fifo));
  EXPECT_ERRNO(Mknod(999999, "x", S_IFIFO | 0600), ESTALE);
}

TEST_F(PosixSemanticsTest, KillSetIdClearsSetUidAndExecutableSetGid) {
  struct Case {
    uint32_t mode;
    uint32_t after;
  };
  const Case cases[] = {{04777, 0777},  {06777, 0777}, {06767, 02767}, {02755, 0755},
                        {02745, 02745}, {0755, 0755},  {04700, 0700}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << std::oct << c.mode);
    auto file = CreateFile(kRootIno, "f", c.mode);
    ASSERT_OK(file);
    SetAttrRequest request;
    request.set_ino(file->ino());
    request.set_valid(KILL_SETID);
    auto cleared = ns_->SetAttr(request);
    ASSERT_OK(cleared);
    EXPECT_EQ(cleared->mode(), S_IFREG | c.after);
    ASSERT_OK(ns_->Unlink(kRootIno, "f"));
  }
}

TEST_F(PosixSemanticsTest, NewInodesInASetGroupIdDirectoryTakeItsGroup) {
  MkdirRequest mkdir;
  mkdir.set_parent(kRootIno);
  mkdir.set_name("shared");
  mkdir.set_mode(02775);
  mkdir.set_uid(1000);
  mkdir.set_gid(500);
  auto shared = ns_->Mkdir(mkdir);
  ASSERT_OK(shared);
  auto file = CreateFile(shared->ino(), "f");  // as uid/gid 1000
  ASSERT_OK(file);
  EXPECT_EQ(file->gid(), 500u);
  EXPECT_EQ(file->mode() & 07777, 0644u);
  mkdir.set_parent(shared->ino());
  mkdir.set_name("sub");
  mkdir.set_mode(0755);
  mkdir.set_gid(1000);
  auto sub = ns_->Mkdir(mkdir);
  ASSERT_OK(sub);
  EXPECT_EQ(sub->gid(), 500u);
  EXPECT_EQ(sub->mode() & 07777, 02755u);
  auto fifo = Mknod(sub->ino(), "fifo", S_IFIFO | 0600);
  ASSERT_OK(fifo);
  EXPECT_EQ(fifo->gid(), 500u);
  // Outside it, the creator's group.
  EXPECT_EQ(CreateFile(kRootIno, "g")->gid(), 1000u);
}

// Checkpoints: every name of an inode is in the subtree of the checkpoint
// that governs it or outside every checkpoint.
TEST_F(PosixSemanticsTest, LinksStayOnTheirSideOfACheckpointBoundary) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "step_1");
  ASSERT_OK(Declare(ckpt, 1));
  const uint64_t inside = File(ckpt, "model.pt");
  const uint64_t outside = File(run, "notes.txt");
  // Within the pending checkpoint: fine.
  ASSERT_OK(Link(inside, ckpt, "model-alias.pt"));
  EXPECT_EQ(Inode(inside).in_checkpoint(), ckpt);
  // Into it from outside, and out of it while it is pending: EXDEV.
  EXPECT_ERRNO(Link(outside, ckpt, "notes.txt"), EXDEV);
  EXPECT_ERRNO(Link(inside, run, "model.pt"), EXDEV);
  // A file of several names does not move across the boundary.
  EXPECT_ERRNO(Rename(ckpt, "model-alias.pt", run, "alias.pt"), EXDEV);
  ASSERT_OK(Link(outside, run, "notes2.txt"));
  EXPECT_ERRNO(Rename(run, "notes2.txt", ckpt, "notes2.txt"), EXDEV);
  EXPECT_EQ(Inode(outside).in_checkpoint(), 0u);

  // Committed: one file, counted once.
  auto info = CommitAll(ckpt, 1);
  ASSERT_OK(info);
  EXPECT_EQ(info->state(), COMMITTED);
  EXPECT_EQ(info->files(), 1u);
  EXPECT_EQ(info->bytes(), 1000u);
  // A new name inside a committed checkpoint is a change: EROFS.
  EXPECT_ERRNO(Link(outside, ckpt, "late.txt"), EROFS);
  EXPECT_ERRNO(Link(inside, ckpt, "late.pt"), EROFS);
}

TEST_F(PosixSemanticsTest, ACommittedFileLinkedOutsideOutlivesItsCheckpoint) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Committed(run, "step_1");
  const uint64_t file = ns_->Lookup(ckpt, "model.pt")->ino();
  const uint64_t snapshot = Dir(kRootIno, "snapshot");
  auto linked = Link(file, snapshot, "model.pt");
  ASSERT_OK(linked);
  EXPECT_EQ(linked->nlink(), 2u);
  // Still the checkpoint's, so unchangeable through the new name too.
  OpenRequest open;
  open.set_ino(file);
  open.set_writer_handle(7);
  EXPECT_ERRNO(ns_->Open(open), EROFS);
  // Into another checkpoint: EXDEV.
  const uint64_t other = Dir(run, "step_2");
  ASSERT_OK(Declare(other, 1));
  EXPECT_ERRNO(Link(file, other, "model.pt"), EXDEV);
  // A directory holding such a link is not declared a checkpoint.
  EXPECT_ERRNO(Declare(snapshot, 1), EINVAL);
  EXPECT_FALSE(IsCheckpointDir(Inode(snapshot)));

  // Removing the checkpoint takes its names, not the file.
  auto removed = ckpts_->Remove(run, "step_1");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_ERRNO(ns_->GetAttr(ckpt), ENOENT);
  EXPECT_EQ(Nlink(file), 1u);
  EXPECT_FALSE(IsOrphan(file));
  EXPECT_EQ(ns_->Lookup(snapshot, "model.pt")->size(), 1000u);
  // With its checkpoint gone the file is an ordinary one again.
  EXPECT_OK(ns_->Open(open));
  ASSERT_OK(ns_->CommitWrite(file, 2000, 0));
  ASSERT_OK(Link(file, snapshot, "again.pt"));
  EXPECT_EQ(Inode(file).in_checkpoint(), 0u);
  ASSERT_OK(Declare(snapshot, 1));
  EXPECT_EQ(Inode(file).in_checkpoint(), snapshot);
}

TEST_F(PosixSemanticsTest, AbortOrphansAFileOfSeveralNamesOnce) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "step_1");
  ASSERT_OK(Declare(ckpt, 1));
  const uint64_t file = File(ckpt, "a.pt");
  ASSERT_OK(Link(file, ckpt, "b.pt"));
  const uint64_t sub = Dir(ckpt, "sub");
  ASSERT_OK(Link(file, sub, "c.pt"));
  auto aborted = ckpts_->Abort(ckpt, EIO, "test");
  ASSERT_OK(aborted);
  EXPECT_EQ(aborted->files(), 1u);
  EXPECT_EQ(Nlink(file), 0u);
  EXPECT_TRUE(IsOrphan(file));
}

}  // namespace
}  // namespace ckptfs::meta
