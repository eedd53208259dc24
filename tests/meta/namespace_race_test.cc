// Namespace tests with injected faults and forced interleavings: conflicts
// are retried (and give up with EAGAIN), backend errors surface unchanged
// and leave nothing half-done, and an operation that lands between another
// operation's reads and its commit makes that commit re-read and decide
// again (rmdir vs create, rename vs rename, create vs create).
#include "gtest/gtest.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "tests/meta/fault_kv_store.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

class NamespaceRaceTest : public NamespaceFixture {
 protected:
  void SetUp() override {
    NamespaceFixture::SetUp();
    AddServer("uuid-a");
    faulty_ = std::make_unique<FaultKvStore>(store_.get());
    // A second namespace over the same data whose commits we control; ns_
    // plays the other, concurrent client.
    faulty_ns_ = std::make_unique<Namespace>(faulty_.get(), membership_.get(), &clock_, options_);
  }
  void TearDown() override {
    faulty_ns_.reset();
    faulty_.reset();
  }

  std::unique_ptr<FaultKvStore> faulty_;
  std::unique_ptr<Namespace> faulty_ns_;
};

TEST_F(NamespaceRaceTest, ConflictsAreRetried) {
  faulty_->InjectConflicts(5);
  MkdirRequest mkdir;
  mkdir.set_parent(kRootIno);
  mkdir.set_name("d");
  auto dir = faulty_ns_->Mkdir(mkdir);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_GE(faulty_->commits(), 6);  // plus the inode-number reservation
  EXPECT_EQ(ns_->Lookup(kRootIno, "d")->ino(), dir->ino());
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 3u);  // applied exactly once
}

TEST_F(NamespaceRaceTest, EndlessConflictsGiveUpWithEAGAIN) {
  faulty_->InjectConflicts(kMaxTxnAttempts);
  MkdirRequest mkdir;
  mkdir.set_parent(kRootIno);
  mkdir.set_name("d");
  auto dir = faulty_ns_->Mkdir(mkdir);
  EXPECT_ERRNO(dir, EAGAIN);
  EXPECT_ERRNO(ns_->Lookup(kRootIno, "d"), ENOENT);
}

TEST_F(NamespaceRaceTest, BackendErrorsSurfaceAndChangeNothing) {
  faulty_->InjectError(ErrnoStatus(EIO, "disk on fire"));
  EXPECT_ERRNO(faulty_ns_->Unlink(kRootIno, "x"), ENOENT);  // fails before committing
  ASSERT_TRUE(CreateFile(kRootIno, "x").ok());
  auto unlinked = faulty_ns_->Unlink(kRootIno, "x");
  EXPECT_ERRNO(unlinked, EIO);
  EXPECT_NE(unlinked.message().find("disk on fire"), std::string::npos);
  EXPECT_TRUE(ns_->Lookup(kRootIno, "x").ok());
  EXPECT_TRUE(ns_->DueOrphans(0, 10)->empty());
}

TEST_F(NamespaceRaceTest, CreateLandingBeforeRmdirCommitsMakesItENOTEMPTY) {
  auto dir = MakeDir(kRootIno, "d");
  ASSERT_TRUE(dir.ok());
  faulty_->BeforeNextCommit([&] { ASSERT_TRUE(CreateFile(dir->ino(), "late").ok()); });
  EXPECT_ERRNO(faulty_ns_->Rmdir(kRootIno, "d"), ENOTEMPTY);
  EXPECT_TRUE(ns_->Lookup(dir->ino(), "late").ok());
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 3u);
}

TEST_F(NamespaceRaceTest, RmdirLandingBeforeCreateCommitsMakesItESTALE) {
  auto dir = MakeDir(kRootIno, "d");
  ASSERT_TRUE(dir.ok());
  faulty_->BeforeNextCommit([&] { ASSERT_OK(ns_->Rmdir(kRootIno, "d")); });
  CreateRequest create;
  create.set_parent(dir->ino());
  create.set_name("orphaned-entry");
  EXPECT_ERRNO(faulty_ns_->Create(create), ESTALE);
  // No entry was left behind in the removed directory.
  EXPECT_TRUE(store_->Scan(DentryPrefix(dir->ino()), "", 10)->empty());
}

TEST_F(NamespaceRaceTest, CrossedDirectoryRenamesCannotMakeALoop) {
  auto a = MakeDir(kRootIno, "a");
  auto b = MakeDir(kRootIno, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  // While a moves under b, b moves under a: one of them must fail, or the
  // two directories would be each other's ancestors, cut off from the root.
  faulty_->BeforeNextCommit([&] { ASSERT_OK(Rename(kRootIno, "b", a->ino(), "b")); });
  RenameRequest rename;
  rename.set_parent(kRootIno);
  rename.set_name("a");
  rename.set_new_parent(b->ino());
  rename.set_new_name("a");
  // On re-reading, b lies under a: moving a into b is a loop.
  EXPECT_ERRNO(faulty_ns_->Rename(rename), EINVAL);
  EXPECT_EQ(ns_->Lookup(a->ino(), "b")->ino(), b->ino());
  EXPECT_EQ(ns_->Lookup(kRootIno, "a")->ino(), a->ino());
}

TEST_F(NamespaceRaceTest, AMovedAncestorIsCaughtByTheAncestorWalk) {
  // root/p/a/x and root/c/b. Move p/a into c/b while, concurrently, c moves
  // into p/a/x. Of what the first rename reads, only c changes (b, a and p
  // do not), so only the versions read while walking b's ancestry can
  // catch the loop.
  auto p = MakeDir(kRootIno, "p");
  auto c = MakeDir(kRootIno, "c");
  ASSERT_TRUE(p.ok() && c.ok());
  auto a = MakeDir(p->ino(), "a");
  auto b = MakeDir(c->ino(), "b");
  ASSERT_TRUE(a.ok() && b.ok());
  auto x = MakeDir(a->ino(), "x");
  ASSERT_TRUE(x.ok());
  faulty_->BeforeNextCommit([&] { ASSERT_OK(Rename(kRootIno, "c", x->ino(), "c")); });
  RenameRequest rename;
  rename.set_parent(p->ino());
  rename.set_name("a");
  rename.set_new_parent(b->ino());
  rename.set_new_name("a");
  EXPECT_ERRNO(faulty_ns_->Rename(rename), EINVAL);
  EXPECT_EQ(ns_->Lookup(p->ino(), "a")->ino(), a->ino());
  EXPECT_EQ(ns_->Lookup(x->ino(), "c")->ino(), c->ino());
  EXPECT_ERRNO(ns_->Lookup(b->ino(), "a"), ENOENT);
}

TEST_F(NamespaceRaceTest, TwoExclusiveCreatesOfOneNameOneWins) {
  faulty_->BeforeNextCommit([&] { ASSERT_TRUE(CreateFile(kRootIno, "rank0").ok()); });
  CreateRequest create;
  create.set_parent(kRootIno);
  create.set_name("rank0");
  create.set_exclusive(true);
  EXPECT_ERRNO(faulty_ns_->Create(create), EEXIST);
  create.set_exclusive(false);
  faulty_->BeforeNextCommit([&] { ASSERT_TRUE(CreateFile(kRootIno, "rank1").ok()); });
  create.set_name("rank1");
  auto opened = faulty_ns_->Create(create);
  ASSERT_TRUE(opened.ok());
  EXPECT_FALSE(opened->created());  // it opened the file the other side made
  EXPECT_EQ(opened->attr().ino(), ns_->Lookup(kRootIno, "rank1")->ino());
  EXPECT_EQ(ns_->StatFs()->files(), 3u);
}

}  // namespace
}  // namespace ckptfs::meta
