// Reader holds (server/meta/ops/reader_hold.cc, ops/orphan.cc): a read-only
// open of a checkpoint file registers its handle; a checkpoint removed
// (RemoveCheckpoint, retention, abort) keeps the chunks of the files a
// reader holds — due once the last hold is released or the grace ends —
// and frees the others at once; an orphan claimed for reclamation refuses
// new readers; files outside checkpoints are opened without a transaction.
#include <cerrno>
#include <set>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/meta/keys.h"
#include "tests/meta/checkpoint_test_util.h"

namespace ckptfs::meta {
namespace {

class ReaderHoldTest : public CheckpointFixture {
 protected:
  void SetUp() override {
    options_.orphan_grace = absl::Minutes(5);
    CheckpointFixture::SetUp();
    DropCheckpointParts();
    MakeCheckpointParts(absl::Minutes(5));
  }

  // The checkpoint parts with removed files kept `grace` at most.
  void MakeCheckpointParts(absl::Duration grace) {
    CheckpointFixture::MakeCheckpointParts(CheckpointStore::Options{600, grace});
  }

  std::set<uint64_t> Due() {
    std::set<uint64_t> inos;
    auto due = ns_->DueOrphans(0, 100000);
    EXPECT_TRUE(due.ok()) << due.status();
    if (due.ok()) {
      for (const auto& orphan : *due) inos.insert(orphan.ino);
    }
    return inos;
  }

  // Reader holds stored for `ino`.
  size_t Holds(uint64_t ino) {
    auto holds = store_->Scan(ReaderHoldPrefix(ino), "", 100);
    EXPECT_TRUE(holds.ok()) << holds.status();
    return holds.ok() ? holds->size() : 0;
  }

  // A committed checkpoint `name` of `run` with files a and b.
  struct Ckpt {
    uint64_t dir = 0;
    uint64_t a = 0;
    uint64_t b = 0;
  };
  Ckpt CommittedWithTwoFiles(uint64_t run, const std::string& name) {
    Ckpt ckpt;
    ckpt.dir = Dir(run, name);
    EXPECT_OK(Declare(ckpt.dir, 1));
    ckpt.a = File(ckpt.dir, "a.pt");
    ckpt.b = File(ckpt.dir, "b.pt");
    auto info = CommitAll(ckpt.dir, 1);
    EXPECT_TRUE(info.ok() && info->state() == COMMITTED) << info.status();
    return ckpt;
  }
};

TEST_F(ReaderHoldTest, ARemovedCheckpointKeepsTheFileAReaderHoldsUntilItIsReleased) {
  const uint64_t run = Dir(kRootIno, "run");
  const Ckpt ckpt = CommittedWithTwoFiles(run, "step_1");
  auto opened = ns_->OpenToRead(ckpt.a, 77);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(opened->held);
  EXPECT_EQ(opened->attr.ino(), ckpt.a);
  EXPECT_EQ(Holds(ckpt.a), 1u);

  ASSERT_TRUE(ckpts_->Remove(run, "step_1").ok());
  // The file nobody reads is due at once; the held one is not.
  EXPECT_EQ(Due(), (std::set<uint64_t>{ckpt.b}));
  ASSERT_OK(ns_->DropOrphan(ckpt.b));
  EXPECT_TRUE(Due().empty());
  // Still there for its reader, by inode.
  auto attr = ns_->GetAttr(ckpt.a);
  ASSERT_TRUE(attr.ok()) << attr.status();
  EXPECT_EQ(attr->nlink(), 0u);

  ASSERT_OK(ns_->ReleaseReader(ckpt.a, 77));
  EXPECT_EQ(Holds(ckpt.a), 0u);
  EXPECT_EQ(Due(), (std::set<uint64_t>{ckpt.a}));
  // Claimed: an open now is refused rather than left to read chunks that
  // are about to go.
  EXPECT_ERRNO(ns_->OpenToRead(ckpt.a, 78), ENOENT);
  ASSERT_OK(ns_->DropOrphan(ckpt.a));
  EXPECT_ERRNO(ns_->GetAttr(ckpt.a), ENOENT);
}

TEST_F(ReaderHoldTest, TheGraceEndsAHoldThatIsNeverReleased) {
  const uint64_t run = Dir(kRootIno, "run");
  const Ckpt ckpt = CommittedWithTwoFiles(run, "step_1");
  ASSERT_TRUE(ns_->OpenToRead(ckpt.a, 5).ok());
  ASSERT_TRUE(ns_->OpenToRead(ckpt.a, 6).ok());
  ASSERT_TRUE(ckpts_->Remove(run, "step_1").ok());
  ASSERT_OK(ns_->ReleaseReader(ckpt.a, 5));
  EXPECT_EQ(Due(), (std::set<uint64_t>{ckpt.b}));  // handle 6 still holds a

  clock_.Advance(absl::Minutes(5));
  EXPECT_EQ(Due(), (std::set<uint64_t>{ckpt.a, ckpt.b}));
  // Dropping the orphan drops the hold its handle never released.
  ASSERT_OK(ns_->DropOrphan(ckpt.a));
  EXPECT_EQ(Holds(ckpt.a), 0u);
  ASSERT_OK(ns_->ReleaseReader(ckpt.a, 6));  // harmless now
}

TEST_F(ReaderHoldTest, RetentionKeepsWhatAReaderHolds) {
  const uint64_t run = Dir(kRootIno, "run");
  Keep(run, "1");
  const Ckpt first = CommittedWithTwoFiles(run, "step_1");
  ASSERT_TRUE(ns_->OpenToRead(first.b, 9).ok());
  clock_.Advance(absl::Seconds(1));
  const Ckpt second = CommittedWithTwoFiles(run, "step_2");
  // As the commit's own retention does (it may have run already).
  ASSERT_TRUE(ckpts_->Retain(second.dir).ok());
  EXPECT_ERRNO(ns_->Lookup(run, "step_1"), ENOENT);
  EXPECT_EQ(Due(), (std::set<uint64_t>{first.a}));
  ASSERT_OK(ns_->ReleaseReader(first.b, 9));
  EXPECT_EQ(Due(), (std::set<uint64_t>{first.a, first.b}));
  EXPECT_EQ(Holds(second.a), 0u);
}

TEST_F(ReaderHoldTest, AReaderOpeningARemovedFileByInodeHoldsItToo) {
  const uint64_t run = Dir(kRootIno, "run");
  const Ckpt ckpt = CommittedWithTwoFiles(run, "step_1");
  ASSERT_TRUE(ckpts_->Remove(run, "step_1").ok());
  // Opened (a mount's cached entry) before the reclaimer looked.
  auto opened = ns_->OpenToRead(ckpt.a, 3);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(opened->held);
  EXPECT_EQ(Due(), (std::set<uint64_t>{ckpt.b}));
  ASSERT_OK(ns_->ReleaseReader(ckpt.a, 3));
  EXPECT_EQ(Due(), (std::set<uint64_t>{ckpt.a, ckpt.b}));
}

TEST_F(ReaderHoldTest, FilesOutsideCheckpointsAreNotHeld) {
  auto file = CreateFile(kRootIno, "plain.bin");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(ns_->CommitWrite(file->ino(), 100, 0).ok());
  auto opened = ns_->OpenToRead(file->ino(), 11);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_FALSE(opened->held);
  EXPECT_EQ(opened->attr.size(), 100u);
  EXPECT_EQ(Holds(file->ino()), 0u);
  // An unlinked plain file keeps its grace, held or not.
  ASSERT_OK(ns_->Unlink(kRootIno, "plain.bin"));
  EXPECT_TRUE(Due().empty());
}

TEST_F(ReaderHoldTest, AFileStillBeingWrittenKeepsTheWholeGrace) {
  const uint64_t run = Dir(kRootIno, "run");
  const uint64_t ckpt = Dir(run, "step_1");
  ASSERT_OK(Declare(ckpt, 1));
  auto file = CreateFile(ckpt, "a.pt");
  ASSERT_TRUE(file.ok()) << file.status();
  OpenRequest writer;  // still registered at the removal
  writer.set_ino(file->ino());
  writer.set_writer_handle(42);
  ASSERT_TRUE(ns_->Open(writer).ok());
  ASSERT_TRUE(ckpts_->Remove(run, "step_1").ok());
  EXPECT_TRUE(Due().empty());
  clock_.Advance(absl::Minutes(5));
  EXPECT_EQ(Due(), (std::set<uint64_t>{file->ino()}));
}

}  // namespace
}  // namespace ckptfs::meta
