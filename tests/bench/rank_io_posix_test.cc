// Tests of PosixRankIo on a temporary directory.
#include <sys/stat.h>

#include <cerrno>
#include <memory>
#include <string>

#include "bench/rank_io.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/bench/rank_io_testing.h"

namespace ckptfs::bench {
namespace {

using ::ckptfs::bench::testing::ReadWholeFile;
using ::ckptfs::bench::testing::TempDir;

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

class PosixRankIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    io_ = MakePosixRankIo(dir_.path());
  }

  void WriteFile(const std::string& path, const std::string& data) {
    absl::StatusOr<int> h = io_->Create(path);
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_TRUE(io_->Write(*h, data.data(), data.size()).ok());
    ASSERT_TRUE(io_->Close(*h).ok());
  }

  TempDir dir_;
  std::unique_ptr<RankIo> io_;
};

TEST_F(PosixRankIoTest, WritesAndReadsBack) {
  ASSERT_TRUE(io_->MakeDirs("a/b").ok());
  absl::StatusOr<int> h = io_->Create("a/b/f");
  ASSERT_TRUE(h.ok()) << h.status();
  const std::string data(3 << 20, 'x');
  ASSERT_TRUE(io_->Write(*h, data.data(), data.size()).ok());
  ASSERT_TRUE(io_->Write(*h, "yz", 2).ok());
  ASSERT_TRUE(io_->Fsync(*h).ok());
  ASSERT_TRUE(io_->Close(*h).ok());
  EXPECT_EQ(ReadWholeFile(dir_.path() + "/a/b/f"), data + "yz");

  absl::StatusOr<int> r = io_->OpenRead("/a/b/f");  // a leading '/' is the root's
  ASSERT_TRUE(r.ok()) << r.status();
  std::string got(data.size() + 10, '\0');
  size_t total = 0;
  while (true) {
    absl::StatusOr<size_t> n = io_->Read(*r, got.data() + total, 1 << 20);
    ASSERT_TRUE(n.ok()) << n.status();
    if (*n == 0) break;
    total += *n;
  }
  got.resize(total);
  EXPECT_EQ(got, data + "yz");
  EXPECT_TRUE(io_->Close(*r).ok());
}

TEST_F(PosixRankIoTest, CreateTruncates) {
  WriteFile("f", "long contents");
  WriteFile("f", "new");
  EXPECT_EQ(ReadWholeFile(dir_.path() + "/f"), "new");
}

TEST_F(PosixRankIoTest, ErrorsCarryErrnoAndPath) {
  absl::StatusOr<int> r = io_->OpenRead("missing/file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ErrnoFromStatus(r.status()), ENOENT);
  EXPECT_TRUE(absl::IsNotFound(r.status()));
  EXPECT_NE(r.status().message().find(dir_.path() + "/missing/file"), std::string::npos)
      << r.status();

  absl::Status unlinked = io_->Unlink("nothing");
  EXPECT_TRUE(absl::IsNotFound(unlinked)) << unlinked;
  EXPECT_NE(unlinked.message().find("nothing"), std::string::npos);

  WriteFile("f", "data");
  absl::StatusOr<int> ro = io_->OpenRead("f");
  ASSERT_TRUE(ro.ok());
  absl::Status w = io_->Write(*ro, "x", 1);
  EXPECT_EQ(ErrnoFromStatus(w), EBADF) << w;
  EXPECT_NE(w.message().find(dir_.path() + "/f"), std::string::npos) << w;
  EXPECT_TRUE(io_->Close(*ro).ok());
  EXPECT_EQ(ErrnoFromStatus(io_->Close(*ro)), EBADF);  // closed exactly once
}

TEST_F(PosixRankIoTest, RenameReplacesTheTarget) {
  WriteFile("a", "new");
  WriteFile("b", "old");
  ASSERT_TRUE(io_->Rename("a", "b").ok());
  EXPECT_FALSE(Exists(dir_.path() + "/a"));
  EXPECT_EQ(ReadWholeFile(dir_.path() + "/b"), "new");
  EXPECT_EQ(ErrnoFromStatus(io_->Rename("a", "c")), ENOENT);
}

TEST_F(PosixRankIoTest, MakeDirsIsMkdirP) {
  ASSERT_TRUE(io_->MakeDirs("x/y/z").ok());
  EXPECT_TRUE(io_->MakeDirs("x/y/z").ok());  // exists: fine
  EXPECT_TRUE(Exists(dir_.path() + "/x/y/z"));
  WriteFile("x/file", "f");
  EXPECT_EQ(ErrnoFromStatus(io_->MakeDirs("x/file/sub")), ENOTDIR);
  EXPECT_EQ(ErrnoFromStatus(io_->MakeDirs("x/file")), ENOTDIR);
}

TEST_F(PosixRankIoTest, RemoveTreeRemovesEverythingAndToleratesAbsence) {
  ASSERT_TRUE(io_->MakeDirs("t/a/b").ok());
  WriteFile("t/a/b/f1", "1");
  WriteFile("t/a/f2", "2");
  WriteFile("t/f3", "3");
  ASSERT_TRUE(io_->RemoveTree("t").ok());
  EXPECT_FALSE(Exists(dir_.path() + "/t"));
  EXPECT_TRUE(io_->RemoveTree("t").ok());
  WriteFile("lone", "x");
  EXPECT_TRUE(io_->RemoveTree("lone").ok());
  EXPECT_FALSE(Exists(dir_.path() + "/lone"));
}

TEST_F(PosixRankIoTest, Xattrs) {
  WriteFile("f", "x");
  absl::Status set = io_->SetXattr("f", "user.bench.test", "value-1");
  if (ErrnoFromStatus(set) == ENOTSUP || ErrnoFromStatus(set) == EOPNOTSUPP) {
    GTEST_SKIP() << "no user xattrs on " << dir_.path() << ": " << set;
  }
  ASSERT_TRUE(set.ok()) << set;
  absl::StatusOr<std::string> got = io_->GetXattr("f", "user.bench.test");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "value-1");
  absl::StatusOr<std::string> missing = io_->GetXattr("f", "user.bench.none");
  EXPECT_EQ(ErrnoFromStatus(missing.status()), ENODATA);
  EXPECT_EQ(ErrnoFromStatus(io_->SetXattr("nofile", "user.a", "b")), ENOENT);
}

}  // namespace
}  // namespace ckptfs::bench
