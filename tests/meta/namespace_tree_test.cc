// Namespace tests, part 2: the operations that change the tree's shape —
// unlink (orphans), rmdir, rename with every POSIX outcome — and readdir
// paging, including a directory of 10,000 entries.
#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "server/meta/keys.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

class NamespaceTreeTest : public NamespaceFixture {
 protected:
  void SetUp() override {
    options_.orphan_grace = absl::Seconds(60);
    NamespaceFixture::SetUp();
    AddServer("uuid-a");
  }

  std::vector<uint64_t> DueOrphanInos() {
    auto due = ns_->DueOrphans(0, 1000);
    EXPECT_TRUE(due.ok()) << due.status();
    std::vector<uint64_t> inos;
    if (due.ok()) {
      for (const auto& orphan : *due) inos.push_back(orphan.ino);
    }
    return inos;
  }

  std::vector<std::string> ListNames(uint64_t dir) {
    std::vector<std::string> names;
    std::string start_after;
    while (true) {
      auto page = ns_->ReadDir(dir, start_after, 0);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      for (const DirEntry& entry : page->entries()) names.push_back(entry.name());
      if (!page->more()) break;
      start_after = page->entries().rbegin()->name();
    }
    return names;
  }
};

TEST_F(NamespaceTreeTest, UnlinkOfAFileLeavesAnOrphanUntilItsGraceEnds) {
  auto file = CreateFile(kRootIno, "old.pt");
  ASSERT_TRUE(file.ok());
  ASSERT_OK(ns_->CommitWrite(file->ino(), 9 << 20, 0));
  clock_.Advance(absl::Seconds(1));
  ASSERT_OK(ns_->Unlink(kRootIno, "old.pt"));
  EXPECT_ERRNO(ns_->Lookup(kRootIno, "old.pt"), ENOENT);
  EXPECT_EQ(ns_->GetAttr(kRootIno)->mtime_ns(), clock_.NowNs());
  // An open handle can still stat the file: nlink 0, size and layout kept.
  auto orphan = ns_->GetAttr(file->ino());
  ASSERT_TRUE(orphan.ok()) << orphan.status();
  EXPECT_EQ(orphan->nlink(), 0u);
  EXPECT_EQ(orphan->size(), 9u << 20);
  EXPECT_EQ(orphan->layout().stripe_size(), 1);
  EXPECT_TRUE(DueOrphanInos().empty());  // grace not over
  clock_.Advance(absl::Seconds(60));
  auto due = ns_->DueOrphans(0, 10);
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].ino, file->ino());
  EXPECT_EQ((*due)[0].record.size(), 9u << 20);
  EXPECT_EQ((*due)[0].record.layout().chunk_size(), file->layout().chunk_size());
  EXPECT_EQ(ns_->StatFs()->files(), 2u);  // still holds its inode
  ASSERT_OK(ns_->DropOrphan(file->ino()));
  EXPECT_ERRNO(ns_->GetAttr(file->ino()), ENOENT);
  EXPECT_TRUE(DueOrphanInos().empty());
  EXPECT_EQ(ns_->StatFs()->files(), 1u);
  ASSERT_OK(ns_->DropOrphan(file->ino()));  // idempotent
}

TEST_F(NamespaceTreeTest, UnlinkErrors) {
  ASSERT_TRUE(MakeDir(kRootIno, "d").ok());
  EXPECT_ERRNO(ns_->Unlink(kRootIno, "d"), EISDIR);
  EXPECT_ERRNO(ns_->Unlink(kRootIno, "missing"), ENOENT);
  EXPECT_ERRNO(ns_->Unlink(999, "x"), ESTALE);
  auto file = CreateFile(kRootIno, "f");
  EXPECT_ERRNO(ns_->Unlink(file->ino(), "x"), ENOTDIR);
}

TEST_F(NamespaceTreeTest, UnlinkOfASymlinkDeletesItAtOnce) {
  SymlinkRequest request;
  request.set_parent(kRootIno);
  request.set_name("l");
  request.set_target("t");
  auto link = ns_->Symlink(request);
  ASSERT_TRUE(link.ok());
  ASSERT_OK(ns_->Unlink(kRootIno, "l"));
  EXPECT_ERRNO(ns_->GetAttr(link->ino()), ENOENT);
  clock_.Advance(absl::Hours(2));
  EXPECT_TRUE(DueOrphanInos().empty());
}

TEST_F(NamespaceTreeTest, RmdirRemovesOnlyEmptyDirectories) {
  auto a = MakeDir(kRootIno, "a");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(CreateFile(a->ino(), "f").ok());
  EXPECT_ERRNO(ns_->Rmdir(kRootIno, "a"), ENOTEMPTY);
  EXPECT_ERRNO(ns_->Rmdir(a->ino(), "f"), ENOTDIR);
  EXPECT_ERRNO(ns_->Rmdir(kRootIno, "missing"), ENOENT);
  ASSERT_OK(ns_->Unlink(a->ino(), "f"));
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 3u);
  ASSERT_OK(ns_->Rmdir(kRootIno, "a"));
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 2u);
  EXPECT_ERRNO(ns_->GetAttr(a->ino()), ENOENT);
  EXPECT_ERRNO(ns_->Lookup(kRootIno, "a"), ENOENT);
  EXPECT_ERRNO(CreateFile(a->ino(), "late"), ESTALE);
}

TEST_F(NamespaceTreeTest, RenameWithinADirectory) {
  auto file = CreateFile(kRootIno, "tmp");
  ASSERT_TRUE(file.ok());
  clock_.Advance(absl::Seconds(1));
  ASSERT_OK(Rename(kRootIno, "tmp", kRootIno, "final"));
  EXPECT_ERRNO(ns_->Lookup(kRootIno, "tmp"), ENOENT);
  auto moved = ns_->Lookup(kRootIno, "final");
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->ino(), file->ino());
  EXPECT_EQ(moved->ctime_ns(), clock_.NowNs());
  EXPECT_EQ(ns_->GetAttr(kRootIno)->mtime_ns(), clock_.NowNs());
  // Onto itself: nothing happens.
  ASSERT_OK(Rename(kRootIno, "final", kRootIno, "final"));
  EXPECT_TRUE(ns_->Lookup(kRootIno, "final").ok());
  EXPECT_ERRNO(Rename(kRootIno, "missing", kRootIno, "x"), ENOENT);
}

TEST_F(NamespaceTreeTest, RenameOverAFileReplacesItAndOrphansTheTarget) {
  auto old_meta = CreateFile(kRootIno, ".metadata");
  auto new_meta = CreateFile(kRootIno, ".metadata.tmp");
  ASSERT_TRUE(old_meta.ok() && new_meta.ok());
  ASSERT_OK(ns_->CommitWrite(old_meta->ino(), 100, 0));
  ASSERT_OK(ns_->CommitWrite(new_meta->ino(), 200, 0));
  ASSERT_OK(Rename(kRootIno, ".metadata.tmp", kRootIno, ".metadata"));
  auto found = ns_->Lookup(kRootIno, ".metadata");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->ino(), new_meta->ino());
  EXPECT_EQ(found->size(), 200u);
  EXPECT_ERRNO(ns_->Lookup(kRootIno, ".metadata.tmp"), ENOENT);
  EXPECT_EQ(ns_->GetAttr(old_meta->ino())->nlink(), 0u);
  clock_.Advance(absl::Seconds(61));
  EXPECT_EQ(DueOrphanInos(), std::vector<uint64_t>{old_meta->ino()});
  EXPECT_EQ(ListNames(kRootIno), std::vector<std::string>{".metadata"});
}

TEST_F(NamespaceTreeTest, RenameNoReplaceRefusesAnExistingTarget) {
  ASSERT_TRUE(CreateFile(kRootIno, "a").ok());
  ASSERT_TRUE(CreateFile(kRootIno, "b").ok());
  EXPECT_ERRNO(Rename(kRootIno, "a", kRootIno, "b", /*no_replace=*/true), EEXIST);
  EXPECT_TRUE(ns_->Lookup(kRootIno, "a").ok());
  ASSERT_OK(Rename(kRootIno, "a", kRootIno, "c", /*no_replace=*/true));
}

TEST_F(NamespaceTreeTest, RenameTypeMismatchesFollowPosix) {
  auto dir = MakeDir(kRootIno, "dir");
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(CreateFile(kRootIno, "file").ok());
  EXPECT_ERRNO(Rename(kRootIno, "file", kRootIno, "dir"), EISDIR);
  EXPECT_ERRNO(Rename(kRootIno, "dir", kRootIno, "file"), ENOTDIR);
  ASSERT_TRUE(MakeDir(kRootIno, "full").ok());
  ASSERT_TRUE(CreateFile(ns_->Lookup(kRootIno, "full")->ino(), "x").ok());
  EXPECT_ERRNO(Rename(kRootIno, "dir", kRootIno, "full"), ENOTEMPTY);
  EXPECT_ERRNO(Rename(kRootIno, "file", 424242, "x"), ESTALE);
  EXPECT_ERRNO(Rename(kRootIno, "file", ns_->Lookup(kRootIno, "file")->ino(), "x"), ENOTDIR);
  // Nothing moved.
  EXPECT_EQ(ListNames(kRootIno), (std::vector<std::string>{"dir", "file", "full"}));
}

TEST_F(NamespaceTreeTest, RenameOverAnEmptyDirectoryReplacesIt) {
  auto src = MakeDir(kRootIno, "src");
  auto dst_parent = MakeDir(kRootIno, "p");
  ASSERT_TRUE(src.ok() && dst_parent.ok());
  auto empty = MakeDir(dst_parent->ino(), "empty");
  ASSERT_TRUE(empty.ok());
  ASSERT_TRUE(CreateFile(src->ino(), "inside").ok());
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 4u);
  EXPECT_EQ(ns_->GetAttr(dst_parent->ino())->nlink(), 3u);
  const uint64_t files_before = ns_->StatFs()->files();

  ASSERT_OK(Rename(kRootIno, "src", dst_parent->ino(), "empty"));
  auto moved = ns_->Lookup(dst_parent->ino(), "empty");
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->ino(), src->ino());
  EXPECT_TRUE(ns_->Lookup(src->ino(), "inside").ok());
  EXPECT_ERRNO(ns_->GetAttr(empty->ino()), ENOENT);
  // Root lost a subdirectory; p lost "empty" and gained "src": net zero.
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 3u);
  EXPECT_EQ(ns_->GetAttr(dst_parent->ino())->nlink(), 3u);
  EXPECT_EQ(ns_->StatFs()->files(), files_before - 1);
}

TEST_F(NamespaceTreeTest, RenameMovesDirectoriesAndRefusesTheirOwnSubtree) {
  auto a = MakeDir(kRootIno, "a");
  ASSERT_TRUE(a.ok());
  auto b = MakeDir(a->ino(), "b");
  ASSERT_TRUE(b.ok());
  auto c = MakeDir(b->ino(), "c");
  ASSERT_TRUE(c.ok());
  EXPECT_ERRNO(Rename(kRootIno, "a", c->ino(), "a"), EINVAL);
  EXPECT_ERRNO(Rename(kRootIno, "a", a->ino(), "a2"), EINVAL);
  EXPECT_ERRNO(Rename(a->ino(), "b", c->ino(), "b"), EINVAL);

  // Move c up to the root: nlinks follow.
  ASSERT_OK(Rename(b->ino(), "c", kRootIno, "c"));
  EXPECT_EQ(ns_->GetAttr(b->ino())->nlink(), 2u);
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 4u);
  // Its recorded parent moved too: now a can go under c, and c not under a's tree.
  ASSERT_OK(Rename(kRootIno, "a", c->ino(), "a"));
  EXPECT_ERRNO(Rename(kRootIno, "c", b->ino(), "c"), EINVAL);
  EXPECT_EQ(ns_->GetAttr(c->ino())->nlink(), 3u);
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 3u);
  EXPECT_EQ(ns_->Lookup(c->ino(), "a")->ino(), a->ino());
}

TEST_F(NamespaceTreeTest, ReadDirPagesThroughTenThousandEntries) {
  auto dir = MakeDir(kRootIno, "big");
  ASSERT_TRUE(dir.ok());
  constexpr int kEntries = 10000;
  for (int i = 0; i < kEntries; ++i) {
    if (i % 10 == 0) {
      ASSERT_TRUE(MakeDir(dir->ino(), absl::StrFormat("e%05d", i)).ok());
    } else {
      ASSERT_TRUE(CreateFile(dir->ino(), absl::StrFormat("e%05d", i)).ok());
    }
  }
  // Default page size, following `more`.
  std::vector<std::string> names;
  std::string start_after;
  int pages = 0;
  while (true) {
    auto page = ns_->ReadDir(dir->ino(), start_after, 0);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    for (const DirEntry& entry : page->entries()) {
      const int index = static_cast<int>(names.size());
      EXPECT_EQ(entry.type(), index % 10 == 0 ? DIRECTORY : REGULAR);
      EXPECT_NE(entry.ino(), 0u);
      names.push_back(entry.name());
    }
    if (!page->more()) break;
    ASSERT_EQ(page->entries_size(), 1024);
    start_after = names.back();
  }
  EXPECT_EQ(pages, 10);
  ASSERT_EQ(names.size(), size_t{kEntries});
  for (int i = 0; i < kEntries; ++i) ASSERT_EQ(names[i], absl::StrFormat("e%05d", i));
  EXPECT_EQ(ns_->GetAttr(dir->ino())->nlink(), 2u + kEntries / 10);

  // An exact page boundary: the last full page says no more.
  auto tail = ns_->ReadDir(dir->ino(), absl::StrFormat("e%05d", kEntries - 101), 100);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->entries_size(), 100);
  EXPECT_FALSE(tail->more());
  // A huge limit is clamped to the maximum page.
  auto clamped = ns_->ReadDir(dir->ino(), "", 0xffffffffu);
  ASSERT_TRUE(clamped.ok());
  EXPECT_EQ(clamped->entries_size(), kEntries);  // under the 16384 maximum
  auto small = ns_->ReadDir(dir->ino(), "", 1);
  EXPECT_EQ(small->entries_size(), 1);
  EXPECT_TRUE(small->more());
}

TEST_F(NamespaceTreeTest, ReadDirClampsToTheMaximumPage) {
  options_.readdir_max_limit = 50;
  Reopen();
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(CreateFile(kRootIno, absl::StrCat("f", i)).ok());
  auto page = ns_->ReadDir(kRootIno, "", 1000000);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->entries_size(), 50);
  EXPECT_TRUE(page->more());
  auto file = ns_->Lookup(kRootIno, "f0");
  EXPECT_ERRNO(ns_->ReadDir(file->ino(), "", 0), ENOTDIR);
  // A start_after past every name is an empty last page.
  auto empty = ns_->ReadDir(kRootIno, "zzz", 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->entries_size(), 0);
  EXPECT_FALSE(empty->more());
}

TEST_F(NamespaceTreeTest, ReadDirPagesStayUnderTheMessageLimitWithLongNames) {
  constexpr int kEntries = 5000;
  for (int i = 0; i < kEntries; ++i) {
    ASSERT_TRUE(CreateFile(kRootIno, absl::StrFormat("%05d", i) + std::string(250, 'x')).ok());
  }
  auto first = ns_->ReadDir(kRootIno, "", 0xffffffffu);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->more());
  EXPECT_LT(first->entries_size(), kEntries);
  EXPECT_LT(first->ByteSizeLong(), size_t{2} << 20);
  EXPECT_EQ(ListNames(kRootIno).size(), size_t{kEntries});  // paging still sees all
}

}  // namespace
}  // namespace ckptfs::meta
