// FaultInjectionFileSystem on its own: what survives DropUnsyncedData is
// exactly what was synced — file data by SyncFiles, names by SyncDir of the
// directory holding them, everything by SyncFileSystem — and nothing else.
#include "server/storage/testing/fault_injection_file_system.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

class FaultInjectionFileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    root_ = dir_.path();
    auto ring = Ring::Create(8);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
    MakeFs();
  }

  void MakeFs() {
    auto fs = FaultInjectionFileSystem::Create(root_);
    ASSERT_TRUE(fs.ok()) << fs.status();
    fs_ = *std::move(fs);
  }

  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }

  // Creates (or truncates) `rel` through the seam and writes `data` with a
  // plain write(2), as data reaches a file behind the seam's back.
  void Put(const std::string& rel, const std::string& data) {
    auto fd = fs_->Open(Path(rel), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd.ok()) << fd.status();
    ASSERT_EQ(::write(fd->get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }

  void SyncFile(const std::string& rel) {
    const std::string path = Path(rel);
    ASSERT_TRUE(fs_->SyncFiles(*ring_, absl::MakeConstSpan(&path, 1)).ok());
  }
  void SyncDir(const std::string& rel) {
    ASSERT_TRUE(fs_->SyncDir(*ring_, rel.empty() ? root_ : Path(rel)).ok());
  }

  // The file's contents, or "<missing>".
  std::string Get(const std::string& rel) const {
    std::ifstream in(Path(rel), std::ios::binary);
    if (!in) return "<missing>";
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }
  bool Exists(const std::string& rel) const { return std::filesystem::exists(Path(rel)); }

  void Crash() {
    auto report = fs_->DropUnsyncedData();
    ASSERT_TRUE(report.ok()) << report.status();
  }

  TempDir dir_;
  std::string root_;
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<FaultInjectionFileSystem> fs_;
};

TEST_F(FaultInjectionFileSystemTest, AWriteAndRenameWithoutSyncsVanish) {
  Put("a.tmp", "hello");
  ASSERT_TRUE(fs_->Rename(Path("a.tmp"), Path("a")).ok());
  ASSERT_TRUE(fs_->MakeDir(Path("d")).ok());
  EXPECT_EQ(Get("a"), "hello");
  Crash();
  EXPECT_FALSE(Exists("a"));
  EXPECT_FALSE(Exists("a.tmp"));
  EXPECT_FALSE(Exists("d"));
}

TEST_F(FaultInjectionFileSystemTest, DataSyncAndDirectorySyncTogetherSurvive) {
  Put("a.tmp", "hello");
  ASSERT_TRUE(fs_->Rename(Path("a.tmp"), Path("a")).ok());
  SyncFile("a");
  SyncDir("");
  Crash();
  EXPECT_EQ(Get("a"), "hello");
  EXPECT_FALSE(Exists("a.tmp"));
}

TEST_F(FaultInjectionFileSystemTest, ADataSyncAloneDoesNotKeepTheName) {
  Put("a", "hello");
  SyncFile("a");
  Crash();
  EXPECT_FALSE(Exists("a"));
}

TEST_F(FaultInjectionFileSystemTest, ADirectorySyncAloneKeepsTheNameButNotTheData) {
  Put("a", "hello");
  SyncDir("");
  Crash();
  EXPECT_EQ(Get("a"), "");
}

TEST_F(FaultInjectionFileSystemTest, UnsyncedDataFallsBackToTheLastSyncedContents) {
  Put("a", "one");
  SyncFile("a");
  SyncDir("");
  {
    auto fd = fs_->Open(Path("a"), O_WRONLY | O_TRUNC, 0644);
    ASSERT_TRUE(fd.ok());
    ASSERT_EQ(::write(fd->get(), "two!", 4), 4);
  }
  EXPECT_EQ(Get("a"), "two!");
  Crash();
  EXPECT_EQ(Get("a"), "one");
}

TEST_F(FaultInjectionFileSystemTest, ARenameOverADurableFileIsUndoneWithoutADirectorySync) {
  Put("a", "old");
  SyncFile("a");
  SyncDir("");
  Put("a.tmp", "new");
  SyncFile("a.tmp");  // data durable, the rename below is not
  ASSERT_TRUE(fs_->Rename(Path("a.tmp"), Path("a")).ok());
  EXPECT_EQ(Get("a"), "new");
  Crash();
  EXPECT_EQ(Get("a"), "old");
  EXPECT_FALSE(Exists("a.tmp"));  // its name was never durable either
  // And once the directory is synced the new version stays.
  Put("a.tmp", "new");
  SyncFile("a.tmp");
  ASSERT_TRUE(fs_->Rename(Path("a.tmp"), Path("a")).ok());
  SyncDir("");
  Crash();
  EXPECT_EQ(Get("a"), "new");
}

TEST_F(FaultInjectionFileSystemTest, AnUnlinkIsUndoneWithoutADirectorySync) {
  Put("a", "keep");
  SyncFile("a");
  SyncDir("");
  ASSERT_TRUE(fs_->Unlink(Path("a")).ok());
  EXPECT_FALSE(Exists("a"));
  Crash();
  EXPECT_EQ(Get("a"), "keep");
  ASSERT_TRUE(fs_->Unlink(Path("a")).ok());
  SyncDir("");
  Crash();
  EXPECT_FALSE(Exists("a"));
}

TEST_F(FaultInjectionFileSystemTest, ASubdirectoryNeedsItsParentSynced) {
  ASSERT_TRUE(fs_->MakeDir(Path("d")).ok());
  Put("d/f", "x");
  SyncFile("d/f");
  SyncDir("d");
  Crash();
  EXPECT_FALSE(Exists("d"));  // the root never durably named it
  ASSERT_TRUE(fs_->MakeDir(Path("d")).ok());
  Put("d/f", "x");
  SyncFile("d/f");
  SyncDir("d");
  SyncDir("");
  Crash();
  EXPECT_EQ(Get("d/f"), "x");
}

TEST_F(FaultInjectionFileSystemTest, ARemovedAndRemadeDirectoryIsANewDirectory) {
  ASSERT_TRUE(fs_->MakeDir(Path("d")).ok());
  Put("d/f", "x");
  SyncFile("d/f");
  SyncDir("d");
  SyncDir("");
  ASSERT_TRUE(fs_->Unlink(Path("d/f")).ok());
  ASSERT_TRUE(fs_->RemoveDir(Path("d")).ok());
  ASSERT_TRUE(fs_->MakeDir(Path("d")).ok());
  SyncDir("");  // names the new, empty d; its own entries were never synced
  Crash();
  EXPECT_TRUE(Exists("d"));
  EXPECT_FALSE(Exists("d/f"));
}

TEST_F(FaultInjectionFileSystemTest, SyncFileSystemMakesEverythingDurable) {
  ASSERT_TRUE(fs_->MakeDir(Path("d")).ok());
  ASSERT_TRUE(fs_->MakeDir(Path("d/e")).ok());
  Put("d/e/f", "deep");
  Put("g.tmp", "top");
  ASSERT_TRUE(fs_->Rename(Path("g.tmp"), Path("g")).ok());
  ASSERT_TRUE(fs_->SyncFileSystem(root_).ok());
  Put("h", "late");  // after the sync: lost
  Crash();
  EXPECT_EQ(Get("d/e/f"), "deep");
  EXPECT_EQ(Get("g"), "top");
  EXPECT_FALSE(Exists("g.tmp"));
  EXPECT_FALSE(Exists("h"));
}

TEST_F(FaultInjectionFileSystemTest, WhatTheDirectoryHeldAtCreateCountsAsDurable) {
  fs_.reset();
  std::filesystem::create_directories(Path("x/y"));
  { std::ofstream(Path("x/y/z")) << "before"; }
  MakeFs();
  Put("x/y/new", "after");
  Crash();
  EXPECT_EQ(Get("x/y/z"), "before");
  EXPECT_FALSE(Exists("x/y/new"));
}

TEST_F(FaultInjectionFileSystemTest, ErrorsPassThroughAndChangeNothing) {
  absl::Status missing = fs_->Rename(Path("nope"), Path("a"));
  EXPECT_EQ(ErrnoFromStatus(missing), ENOENT) << missing;
  EXPECT_EQ(ErrnoFromStatus(fs_->SyncDir(*ring_, Path("nope"))), ENOENT);
  ASSERT_TRUE(fs_->MakeDir(Path("d")).ok());
  EXPECT_EQ(ErrnoFromStatus(fs_->MakeDir(Path("d"))), EEXIST);
  SyncDir("");
  Crash();
  EXPECT_TRUE(Exists("d"));
  EXPECT_FALSE(Exists("a"));
}

// The kernel's way with a write-back error: the sync that meets it fails,
// the next one succeeds, and the pages it lost are never written.
TEST_F(FaultInjectionFileSystemTest, AWritebackErrorLosesThePagesForEveryLaterSync) {
  Put("a", "old");
  SyncFile("a");
  SyncDir("");
  Put("a", "new");
  Put("b", "never synced");
  SyncDir("");
  fs_->InjectWritebackError(EIO);
  absl::Status failed = fs_->SyncFileSystem(root_);
  EXPECT_EQ(ErrnoFromStatus(failed), EIO) << failed;
  EXPECT_TRUE(fs_->SyncFileSystem(root_).ok());
  SyncFile("a");
  Crash();
  EXPECT_EQ(Get("a"), "old");
  EXPECT_EQ(Get("b"), "");
  // Written again, a file is written back again.
  Put("a", "rewritten");
  SyncFile("a");
  Crash();
  EXPECT_EQ(Get("a"), "rewritten");
}

}  // namespace
}  // namespace ckptfs::storage
