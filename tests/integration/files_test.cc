// Integration tests of the POSIX surface through a real FUSE mount of a real
// local cluster: sizes around chunk boundaries, random overwrites, concurrent
// writers and readers, rename, unlink of an open file, large directories,
// truncate, append, xattrs, symlinks, statfs and mmap.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

constexpr uint64_t kChunk = 4 << 20;  // the cluster's default chunk size

class FilesTest : public MountedClusterTest {};

void ExpectRoundTrip(const std::string& path, size_t size, uint64_t seed) {
  const std::string data = TestData(size, seed);
  ASSERT_TRUE(WriteWholeFile(path, data).ok()) << path;
  auto st_size = FileSize(path);
  ASSERT_TRUE(st_size.ok()) << st_size.status();
  EXPECT_EQ(*st_size, size) << path;
  auto back = ReadWholeFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), size) << path;
  EXPECT_TRUE(*back == data) << "content differs for " << path;
}

TEST_F(FilesTest, SizesAroundChunkBoundariesRoundTrip) {
  const std::vector<size_t> sizes = {0,         1, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk + 17,
                                     100u << 20};
  for (size_t size : sizes) {
    SCOPED_TRACE(size);
    ExpectRoundTrip(absl::StrCat(TestDir(), "/f", size), size, size + 1);
  }
}

TEST_F(FilesTest, PerDirectoryChunkSizeRoundTrip) {
  const uint64_t chunk = 1 << 20;
  const std::string value = absl::StrCat(chunk);
  ASSERT_EQ(::setxattr(TestDir().c_str(), "user.ckptfs.chunk_size", value.data(), value.size(), 0),
            0)
      << strerror(errno);
  for (size_t size : {size_t{0}, size_t{1}, chunk - 1, chunk, chunk + 1, 3 * chunk + 17}) {
    SCOPED_TRACE(size);
    ExpectRoundTrip(absl::StrCat(TestDir(), "/f", size), size, size + 7);
  }
}

TEST_F(FilesTest, RandomOverwritesPastTheEndMatchAModel) {
  const std::string path = TestDir() + "/random";
  std::string model = TestData(3 * kChunk + 17, 42);
  ASSERT_TRUE(WriteWholeFile(path, model).ok());
  std::mt19937_64 rng(7);
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << strerror(errno);
  for (int i = 0; i < 40; ++i) {
    const uint64_t offset = rng() % (6 * kChunk);
    const size_t len = 1 + rng() % (kChunk + kChunk / 2);
    const std::string data = TestData(len, 1000 + i);
    ASSERT_EQ(::pwrite(fd, data.data(), len, static_cast<off_t>(offset)),
              static_cast<ssize_t>(len));
    if (model.size() < offset + len) model.resize(offset + len, '\0');
    model.replace(offset, len, data);
    if (i % 10 == 9) {  // read back through the same descriptor before close
      std::string back(model.size(), '\0');
      ASSERT_EQ(::pread(fd, back.data(), back.size(), 0), static_cast<ssize_t>(model.size()));
      ASSERT_TRUE(back == model) << "mismatch after overwrite " << i;
    }
  }
  ASSERT_EQ(::close(fd), 0) << strerror(errno);
  auto size = FileSize(path);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, model.size());
  auto back = ReadWholeFile(path, 333333);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == model);
}

TEST_F(FilesTest, SixteenConcurrentWritersOfDifferentFiles) {
  constexpr int kWriters = 16;
  constexpr size_t kSize = 3 * kChunk + 12345;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kWriters);
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      results[i] = WriteWholeFile(absl::StrCat(TestDir(), "/w", i), TestData(kSize, i));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kWriters; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i];
    auto back = ReadWholeFile(absl::StrCat(TestDir(), "/w", i));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == TestData(kSize, i)) << "writer " << i;
  }
}

TEST_F(FilesTest, SixteenConcurrentReadersOfOneFile) {
  const std::string path = TestDir() + "/shared";
  const std::string data = TestData(5 * kChunk + 99, 5);
  ASSERT_TRUE(WriteWholeFile(path, data).ok());
  constexpr int kReaders = 16;
  std::vector<std::thread> threads;
  std::vector<int> ok(kReaders, 0);
  for (int i = 0; i < kReaders; ++i) {
    threads.emplace_back([&, i] {
      auto back = ReadWholeFile(path, 128 * 1024 * (i + 1));
      ok[i] = back.ok() && *back == data;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kReaders; ++i) EXPECT_TRUE(ok[i]) << "reader " << i;
}

TEST_F(FilesTest, RenameReplacesAnExistingFileAtomically) {
  const std::string a = TestDir() + "/a", b = TestDir() + "/b";
  ASSERT_TRUE(WriteWholeFile(a, TestData(kChunk + 3, 1)).ok());
  ASSERT_TRUE(WriteWholeFile(b, TestData(100, 2)).ok());
  ASSERT_EQ(::rename(a.c_str(), b.c_str()), 0) << strerror(errno);
  struct stat st {};
  EXPECT_NE(::stat(a.c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
  auto back = ReadWholeFile(b);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == TestData(kChunk + 3, 1));
  // Directories move too, with their contents.
  ASSERT_EQ(::mkdir((TestDir() + "/d1").c_str(), 0755), 0);
  ASSERT_TRUE(WriteWholeFile(TestDir() + "/d1/x", "x").ok());
  ASSERT_EQ(::rename((TestDir() + "/d1").c_str(), (TestDir() + "/d2").c_str()), 0);
  auto x = ReadWholeFile(TestDir() + "/d2/x");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(*x, "x");
  // A directory cannot move into itself.
  EXPECT_NE(::rename((TestDir() + "/d2").c_str(), (TestDir() + "/d2/sub").c_str()), 0);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(FilesTest, UnlinkedOpenFileStaysReadable) {
  const std::string path = TestDir() + "/doomed";
  const std::string data = TestData(2 * kChunk + 5, 9);
  ASSERT_TRUE(WriteWholeFile(path, data).ok());
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::unlink(path.c_str()), 0) << strerror(errno);
  struct stat st {};
  EXPECT_NE(::stat(path.c_str(), &st), 0);
  std::string back(data.size(), '\0');
  EXPECT_EQ(::pread(fd, back.data(), back.size(), 0), static_cast<ssize_t>(data.size()));
  EXPECT_TRUE(back == data);
  ::close(fd);
}

TEST_F(FilesTest, TenThousandFilesListCompletely) {
  constexpr int kFiles = 10000;
  std::set<std::string> expected;
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = absl::StrCat("rank_", i, ".pt");
    const int fd = ::open((TestDir() + "/" + name).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    ASSERT_GE(fd, 0) << name << ": " << strerror(errno);
    ASSERT_EQ(::close(fd), 0);
    expected.insert(name);
  }
  DIR* dir = ::opendir(TestDir().c_str());
  ASSERT_NE(dir, nullptr);
  std::set<std::string> seen;
  int entries = 0;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    ++entries;
    seen.insert(name);
  }
  ::closedir(dir);
  EXPECT_EQ(entries, kFiles) << "duplicates or missing entries";
  EXPECT_EQ(seen, expected);
}

TEST_F(FilesTest, NamesOver255BytesAreRejected) {
  const std::string ok_name(255, 'a');
  const std::string long_name(256, 'a');
  int fd = ::open((TestDir() + "/" + long_name).c_str(), O_WRONLY | O_CREAT, 0644);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(errno, ENAMETOOLONG);
  EXPECT_NE(::mkdir((TestDir() + "/" + long_name).c_str(), 0755), 0);
  EXPECT_EQ(errno, ENAMETOOLONG);
  fd = ::open((TestDir() + "/" + ok_name).c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  ::close(fd);
}

TEST_F(FilesTest, TruncateDownThenExtendReadsZeros) {
  const std::string path = TestDir() + "/t";
  ASSERT_TRUE(WriteWholeFile(path, TestData(2 * kChunk + 10, 3)).ok());
  ASSERT_EQ(::truncate(path.c_str(), 100), 0) << strerror(errno);
  ASSERT_EQ(::truncate(path.c_str(), 3 * kChunk), 0) << strerror(errno);
  auto back = ReadWholeFile(path);
  ASSERT_TRUE(back.ok());
  std::string expected = TestData(2 * kChunk + 10, 3).substr(0, 100);
  expected.resize(3 * kChunk, '\0');
  EXPECT_TRUE(*back == expected);
  // O_TRUNC empties; a later write past the old end leaves zeros before it.
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "z", 1, kChunk + 1), 1);
  ASSERT_EQ(::close(fd), 0);
  back = ReadWholeFile(path);
  ASSERT_TRUE(back.ok());
  expected.assign(kChunk + 2, '\0');
  expected[kChunk + 1] = 'z';
  EXPECT_TRUE(*back == expected);
}

TEST_F(FilesTest, AppendWritesAtTheEnd) {
  const std::string path = TestDir() + "/log";
  ASSERT_TRUE(WriteWholeFile(path, "hello ").ok());
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "world", 5), 5);
  ASSERT_EQ(::write(fd, "!", 1), 1);
  ASSERT_EQ(::close(fd), 0);
  auto back = ReadWholeFile(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "hello world!");
}

TEST_F(FilesTest, XattrsSetGetListRemove) {
  const std::string path = TestDir() + "/x";
  ASSERT_TRUE(WriteWholeFile(path, "data").ok());
  ASSERT_EQ(::setxattr(path.c_str(), "user.step", "1000", 4, 0), 0) << strerror(errno);
  ASSERT_EQ(::setxattr(path.c_str(), "user.rank", "17", 2, XATTR_CREATE), 0);
  EXPECT_NE(::setxattr(path.c_str(), "user.rank", "18", 2, XATTR_CREATE), 0);
  EXPECT_EQ(errno, EEXIST);
  char buf[64] = {};
  EXPECT_EQ(::getxattr(path.c_str(), "user.step", nullptr, 0), 4);  // size query
  ASSERT_EQ(::getxattr(path.c_str(), "user.step", buf, sizeof(buf)), 4);
  EXPECT_EQ(std::string(buf, 4), "1000");
  EXPECT_EQ(::getxattr(path.c_str(), "user.step", buf, 2), -1);
  EXPECT_EQ(errno, ERANGE);
  char list[256] = {};
  const ssize_t n = ::listxattr(path.c_str(), list, sizeof(list));
  ASSERT_GT(n, 0);
  std::set<std::string> names;
  for (ssize_t i = 0; i < n; i += static_cast<ssize_t>(strlen(list + i)) + 1)
    names.insert(list + i);
  EXPECT_EQ(names, (std::set<std::string>{"user.rank", "user.step"}));
  ASSERT_EQ(::removexattr(path.c_str(), "user.step"), 0);
  EXPECT_EQ(::getxattr(path.c_str(), "user.step", buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ENODATA);
}

TEST_F(FilesTest, SymlinksDirectoriesModesTimesAndStatfs) {
  const std::string target = "step_1000/rank_0.pt";
  const std::string link = TestDir() + "/latest";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0) << strerror(errno);
  char buf[256] = {};
  ASSERT_EQ(::readlink(link.c_str(), buf, sizeof(buf)), static_cast<ssize_t>(target.size()));
  EXPECT_EQ(std::string(buf), target);

  const std::string dir = TestDir() + "/sub";
  ASSERT_EQ(::mkdir(dir.c_str(), 0750), 0);
  ASSERT_TRUE(WriteWholeFile(dir + "/f", "f").ok());
  EXPECT_NE(::rmdir(dir.c_str()), 0);
  EXPECT_EQ(errno, ENOTEMPTY);
  ASSERT_EQ(::unlink((dir + "/f").c_str()), 0);
  ASSERT_EQ(::rmdir(dir.c_str()), 0) << strerror(errno);

  const std::string file = TestDir() + "/m";
  ASSERT_TRUE(WriteWholeFile(file, "m").ok());
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  const timeval times[2] = {{1000000000, 0}, {1234567890, 0}};
  ASSERT_EQ(::utimes(file.c_str(), times), 0) << strerror(errno);
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mtime, 1234567890);

  struct statvfs vfs {};
  ASSERT_EQ(::statvfs(mnt().c_str(), &vfs), 0) << strerror(errno);
  EXPECT_GT(vfs.f_blocks, 0u);
  EXPECT_GT(vfs.f_bavail, 0u);
}

TEST_F(FilesTest, MmapReadSeesTheWholeFile) {
  const std::string path = TestDir() + "/mapped";
  const std::string data = TestData(2 * kChunk + 4097, 11);
  ASSERT_TRUE(WriteWholeFile(path, data).ok());
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, data.size(), PROT_READ, MAP_PRIVATE, fd, 0);
  ASSERT_NE(map, MAP_FAILED) << strerror(errno);
  EXPECT_EQ(0, memcmp(map, data.data(), data.size()));
  ::munmap(map, data.size());
  ::close(fd);
}

TEST_F(FilesTest, FsyncSucceedsAndDataSurvivesReopen) {
  const std::string path = TestDir() + "/synced";
  const std::string data = TestData(kChunk + 100, 13);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);  // exact size while still open
  EXPECT_EQ(static_cast<size_t>(st.st_size), data.size());
  ASSERT_EQ(::fsync(fd), 0) << strerror(errno);
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), data.size());
  ASSERT_EQ(::close(fd), 0);
  auto back = ReadWholeFile(path);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == data);
}

}  // namespace
}  // namespace ckptfs::testing
