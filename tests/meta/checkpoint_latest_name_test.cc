// The name of a run directory's `latest` symlink (user.ckptfs.latest_name):
// what values are taken, that setting and removing it move the symlink in
// the same transaction, that commits, removals and retention then keep it
// under that name (or keep none), that a name taken by a file is refused,
// that a framework's own file called `latest` is never touched, and that
// subdirectories do not inherit it.
#include <cerrno>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/meta/checkpoint/xattr_rules.h"
#include "server/meta/meta_txn.h"
#include "tests/meta/checkpoint_test_util.h"

namespace ckptfs::meta {
namespace {

TEST(LatestNameRulesTest, AFileNameOrNothing) {
  EXPECT_EQ(**ParseLatestName("latest_committed"), "latest_committed");
  EXPECT_EQ(**ParseLatestName("ckpt latest\n"), "ckpt latest");  // what `echo` writes
  EXPECT_EQ(**ParseLatestName(std::string(255, 'a')), std::string(255, 'a'));
  EXPECT_FALSE(ParseLatestName("")->has_value());
  EXPECT_FALSE(ParseLatestName("\n")->has_value());
  for (const std::string& bad :
       {std::string("a/b"), std::string("."), std::string(".."), std::string("/"),
        std::string(256, 'a'), std::string("a\0b", 3), std::string("\xff\xfe")}) {
    absl::StatusOr<std::optional<std::string>> parsed = ParseLatestName(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(ErrnoOf(parsed.status()), EINVAL) << bad;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), "user.ckptfs.latest_name"))
        << parsed.status();
  }
  EXPECT_OK(ValidateXattrNameNotReserved(kLatestNameXattr));
  EXPECT_ERRNO(ValidateCheckpointXattrValue(kLatestNameXattr, "a/b"), EINVAL);
}

class LatestNameTest : public CheckpointFixture {
 protected:
  // The target of symlink `name` in `run`; "<none>" if absent,
  // "<not a symlink>" for anything else.
  std::string Pointer(uint64_t run, const std::string& name) {
    auto entry = ns_->Lookup(run, name);
    if (!entry.ok()) return "<none>";
    auto target = ns_->ReadLink(entry->ino());
    return target.ok() ? *target : "<not a symlink>";
  }
  absl::Status SetLatestName(uint64_t dir, const std::string& value) {
    SetXattrRequest request;
    request.set_ino(dir);
    request.set_name(kLatestNameXattr);
    request.set_value(value);
    return ns_->SetXattr(request);
  }
  std::string ListedLatest(uint64_t run) {
    auto list = ckpts_->List(run);
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? list->latest() : "<error>";
  }
  // Commits `name` in `run` a second after the previous one.
  uint64_t CommitNext(uint64_t run, const std::string& name) {
    clock_.Advance(absl::Seconds(1));
    return Committed(run, name);
  }
};

TEST_F(LatestNameTest, BadValuesAndNonDirectoriesAreRefusedAndChangeNothing) {
  const uint64_t run = Dir(kRootIno, "run");
  Committed(run, "a");
  const uint64_t file = File(run, "notes.txt");
  for (const char* bad : {"a/b", ".", ".."}) {
    EXPECT_ERRNO(SetLatestName(run, bad), EINVAL) << bad;
  }
  EXPECT_ERRNO(SetLatestName(run, std::string(256, 'x')), EINVAL);
  absl::Status on_file = SetLatestName(file, "ptr");
  EXPECT_EQ(ErrnoOf(on_file), EINVAL);
  EXPECT_TRUE(absl::StrContains(on_file.message(), "run directory")) << on_file;
  EXPECT_ERRNO(ns_->GetXattr(run, kLatestNameXattr), ENODATA);
  EXPECT_ERRNO(ns_->GetXattr(file, kLatestNameXattr), ENODATA);
  EXPECT_EQ(Pointer(run, "latest"), "a");
}

TEST_F(LatestNameTest, NoPointerLeavesAFrameworksOwnLatestFileAlone) {
  const uint64_t run = Dir(kRootIno, "run");
  Committed(run, "step-1");
  ASSERT_EQ(Pointer(run, "latest"), "step-1");
  const uint64_t inodes_before = *CountInodes(store_.get());
  ASSERT_OK(SetLatestName(run, ""));
  EXPECT_EQ(Pointer(run, "latest"), "<none>");  // the symlink went with the setting
  EXPECT_EQ(*CountInodes(store_.get()), inodes_before - 1);
  EXPECT_EQ(*ns_->GetXattr(run, kLatestNameXattr), "");
  // DeepSpeed: open(save_dir/latest, "w"), write the tag, close.
  const uint64_t mine = File(run, "latest", 6);
  CommitNext(run, "step-2");
  const uint64_t step3 = CommitNext(run, "step-3");
  EXPECT_EQ(ns_->Lookup(run, "latest")->ino(), mine);
  EXPECT_EQ(ns_->GetAttr(mine)->type(), REGULAR);
  EXPECT_EQ(ns_->GetAttr(mine)->size(), 6u);
  EXPECT_EQ(ListedLatest(run), "step-3");  // what user.ckptfs.latest reads
  // Removal of the newest: user.ckptfs.latest falls back, the file stays.
  ASSERT_OK(ns_->Unlink(step3, "model.pt"));
  EXPECT_EQ(ListedLatest(run), "step-2");
  ASSERT_OK(coordinator_->Remove(run, "step-2"));
  EXPECT_EQ(ListedLatest(run), "step-1");
  EXPECT_EQ(ns_->Lookup(run, "latest")->ino(), mine);
  EXPECT_EQ(ns_->GetAttr(mine)->size(), 6u);
}

TEST_F(LatestNameTest, ThePointerMovesToTheNewNameAndFollowsCommitsAndRemovals) {
  const uint64_t run = Dir(kRootIno, "run");
  Committed(run, "a");
  ASSERT_OK(SetLatestName(run, "latest_committed"));
  EXPECT_EQ(Pointer(run, "latest"), "<none>");
  EXPECT_EQ(Pointer(run, "latest_committed"), "a");
  const uint64_t b = CommitNext(run, "b");
  EXPECT_EQ(Pointer(run, "latest_committed"), "b");
  EXPECT_EQ(Pointer(run, "latest"), "<none>");
  // Its first unlink ends b: the pointer falls back to a.
  ASSERT_OK(ns_->Unlink(b, "model.pt"));
  EXPECT_EQ(Pointer(run, "latest_committed"), "a");
  ASSERT_OK(coordinator_->Remove(run, "a"));
  EXPECT_EQ(Pointer(run, "latest_committed"), "<none>");
  CommitNext(run, "c");
  EXPECT_EQ(Pointer(run, "latest_committed"), "c");
  // Setting the same name again changes nothing; removing the setting
  // brings `latest` back.
  const uint64_t link = ns_->Lookup(run, "latest_committed")->ino();
  ASSERT_OK(SetLatestName(run, "latest_committed"));
  EXPECT_EQ(ns_->Lookup(run, "latest_committed")->ino(), link);
  ASSERT_OK(ns_->RemoveXattr(run, kLatestNameXattr));
  EXPECT_EQ(Pointer(run, "latest_committed"), "<none>");
  EXPECT_EQ(Pointer(run, "latest"), "c");
  // A run directory without committed checkpoints gets no pointer.
  const uint64_t empty = Dir(kRootIno, "empty");
  ASSERT_OK(SetLatestName(empty, "ptr"));
  EXPECT_EQ(Pointer(empty, "ptr"), "<none>");
}

TEST_F(LatestNameTest, ANameTakenByAFileOrDirectoryIsRefused) {
  const uint64_t run = Dir(kRootIno, "run");
  Committed(run, "a");
  const uint64_t file = File(run, "taken", 10);
  Dir(run, "taken_dir");
  const int64_t version = Version(run);
  absl::Status taken = SetLatestName(run, "taken");
  EXPECT_EQ(ErrnoOf(taken), EEXIST);
  EXPECT_TRUE(absl::StrContains(taken.message(), "is a regular file")) << taken;
  EXPECT_TRUE(absl::StrContains(taken.message(), "choose another name")) << taken;
  EXPECT_ERRNO(SetLatestName(run, "taken_dir"), EEXIST);
  EXPECT_EQ(Version(run), version);  // nothing staged
  EXPECT_ERRNO(ns_->GetXattr(run, kLatestNameXattr), ENODATA);
  EXPECT_EQ(Pointer(run, "latest"), "a");
  EXPECT_EQ(ns_->GetAttr(file)->size(), 10u);
  // Back to the default over a user's file called `latest`: refused too.
  ASSERT_OK(SetLatestName(run, ""));
  File(run, "latest", 4);
  EXPECT_ERRNO(ns_->RemoveXattr(run, kLatestNameXattr), EEXIST);
  EXPECT_EQ(*ns_->GetXattr(run, kLatestNameXattr), "");
  // A symlink of the name is taken for the pointer.
  SymlinkRequest symlink;
  symlink.set_parent(run);
  symlink.set_name("ptr");
  symlink.set_target("elsewhere");
  ASSERT_TRUE(ns_->Symlink(symlink).ok());
  ASSERT_OK(SetLatestName(run, "ptr"));
  EXPECT_EQ(Pointer(run, "ptr"), "a");
}

TEST_F(LatestNameTest, RetentionKeepsThePointerUnderItsNameAndSubdirectoriesDoNotInherit) {
  const uint64_t run = Dir(kRootIno, "run");
  ASSERT_OK(SetLatestName(run, "newest"));
  SetXattrRequest keep;
  keep.set_ino(run);
  keep.set_name(std::string(kKeepXattr));
  keep.set_value("1");
  ASSERT_OK(ns_->SetXattr(keep));
  Committed(run, "a");
  EXPECT_EQ(Pointer(run, "newest"), "a");
  CommitNext(run, "b");
  auto removed = ckpts_->Retain(ns_->Lookup(run, "b")->ino());
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_ERRNO(ns_->Lookup(run, "a"), ENOENT);
  EXPECT_EQ(Pointer(run, "newest"), "b");
  EXPECT_EQ(Pointer(run, "latest"), "<none>");
  const uint64_t sub = Dir(run, "sub");
  EXPECT_ERRNO(ns_->GetXattr(sub, kLatestNameXattr), ENODATA);
  Committed(sub, "c");
  EXPECT_EQ(Pointer(sub, "latest"), "c");
  EXPECT_EQ(Pointer(sub, "newest"), "<none>");
}

}  // namespace
}  // namespace ckptfs::meta
