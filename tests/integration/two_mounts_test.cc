// Two mounts of one cluster stand in for two training nodes: a file closed
// on one is complete when opened on the other (close-to-open), and a rename
// or unlink on one is seen by the other, also where the other caches the
// directory or the file's pages.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

// Opens `path` read-only (an open like any reader's, which decides whether
// the kernel keeps the file's cached pages) and counts how many of its
// pages are in the page cache right after: {resident, total}, or {-1, -1}.
std::pair<int, int> PagesCachedAfterOpen(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return {-1, -1};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size == 0) {
    ::close(fd);
    return {-1, -1};
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = (static_cast<size_t>(st.st_size) + page - 1) / page;
  void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return {-1, -1};
  std::vector<unsigned char> in_core(pages);
  const int rc = ::mincore(map, static_cast<size_t>(st.st_size), in_core.data());
  ::munmap(map, static_cast<size_t>(st.st_size));
  if (rc != 0) return {-1, -1};
  int resident = 0;
  for (unsigned char c : in_core) resident += c & 1;
  return {resident, static_cast<int>(pages)};
}

// Node A and node B: two mounts of one local cluster.
class TwoMountsTest : public ::testing::Test {
 protected:
  // Starts the cluster and mounts A with the defaults and B with `b_flags`.
  void StartNodes(std::vector<std::string> b_flags = {}) {
    auto cluster = LocalCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    auto a = cluster_->Mount("node_a");
    ASSERT_TRUE(a.ok()) << a.status();
    a_ = *a;
    auto b = cluster_->Mount("node_b", std::move(b_flags));
    ASSERT_TRUE(b.ok()) << b.status();
    b_ = *b;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string a_, b_;  // mountpoints
};

TEST_F(TwoMountsTest, CloseToOpenAndNamespaceChangesAreSeenByTheOtherNode) {
  ASSERT_NO_FATAL_FAILURE(StartNodes());

  ASSERT_EQ(::mkdir((a_ + "/run1").c_str(), 0755), 0);
  // Node B looks first, so any cached attributes it has are of the old state.
  struct stat st {};
  EXPECT_NE(::stat((b_ + "/run1/rank_0.pt").c_str(), &st), 0);

  const std::string data = TestData((9 << 20) + 3, 77);
  ASSERT_TRUE(WriteWholeFile(a_ + "/run1/rank_0.pt", data).ok());
  auto seen = ReadWholeFile(b_ + "/run1/rank_0.pt");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->size(), data.size());
  EXPECT_TRUE(*seen == data);

  // Overwrite on A with a shorter file; B sees exactly the new content.
  const std::string data2 = TestData(1 << 20, 78);
  ASSERT_TRUE(WriteWholeFile(a_ + "/run1/rank_0.pt", data2).ok());
  seen = ReadWholeFile(b_ + "/run1/rank_0.pt");
  ASSERT_TRUE(seen.ok());
  EXPECT_TRUE(*seen == data2);

  ASSERT_EQ(::rename((a_ + "/run1/rank_0.pt").c_str(), (a_ + "/run1/final.pt").c_str()), 0);
  EXPECT_NE(::stat((b_ + "/run1/rank_0.pt").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
  seen = ReadWholeFile(b_ + "/run1/final.pt");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(*seen == data2);

  ASSERT_EQ(::unlink((b_ + "/run1/final.pt").c_str()), 0);
  EXPECT_NE(::stat((a_ + "/run1/final.pt").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
}

// Node B caches directories for 30 s, so every step below meets B's cached
// (stale) directory: a directory node A removed and recreated under its name
// must still be found at once on B (the metadata service answers ESTALE for
// the removed one, and B's kernel walks the path again), and a create in a
// directory that is gone must fail with ENOENT, not land anywhere. Node C
// caches names but not attributes: its stat() of the stale directory asks
// for the removed inode's attributes, which answers ESTALE as well.
TEST_F(TwoMountsTest, ADirectoryRecreatedOnOneNodeIsFoundAtOnceOnANodeThatCachedIt) {
  ASSERT_NO_FATAL_FAILURE(StartNodes({"--dir_timeout_s=30"}));
  auto c = cluster_->Mount("node_c", {"--entry_timeout_s=30"});
  ASSERT_TRUE(c.ok()) << c.status();

  const std::string step_a = a_ + "/run1/step_1";
  const std::string step_b = b_ + "/run1/step_1";
  const std::string step_c = *c + "/run1/step_1";
  ASSERT_EQ(::mkdir((a_ + "/run1").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(step_a.c_str(), 0755), 0);
  const std::string old_data = TestData(100000, 1);
  ASSERT_TRUE(WriteWholeFile(step_a + "/rank_0.pt", old_data).ok());
  struct stat old_dir {};
  ASSERT_EQ(::stat(step_b.c_str(), &old_dir), 0);
  struct stat st {};
  ASSERT_EQ(::stat(step_c.c_str(), &st), 0);
  ASSERT_EQ(st.st_ino, old_dir.st_ino);
  auto seen = ReadWholeFile(step_b + "/rank_0.pt");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(*seen == old_data);

  ASSERT_EQ(::unlink((step_a + "/rank_0.pt").c_str()), 0);
  ASSERT_EQ(::rmdir(step_a.c_str()), 0);
  ASSERT_EQ(::mkdir(step_a.c_str(), 0755), 0);
  const std::string new_data = TestData(200000, 2);
  ASSERT_TRUE(WriteWholeFile(step_a + "/rank_0.pt", new_data).ok());
  struct stat new_dir {};
  ASSERT_EQ(::stat(step_a.c_str(), &new_dir), 0);
  ASSERT_NE(new_dir.st_ino, old_dir.st_ino);

  ASSERT_EQ(::stat(step_c.c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_ino, new_dir.st_ino);

  seen = ReadWholeFile(step_b + "/rank_0.pt");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(*seen == new_data);
  ASSERT_EQ(::stat(step_b.c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, new_dir.st_ino);
  EXPECT_NE(::stat((step_b + "/absent").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);

  // Gone for good on A: B's create there fails, and nothing is created.
  ASSERT_EQ(::unlink((step_a + "/rank_0.pt").c_str()), 0);
  ASSERT_EQ(::rmdir(step_a.c_str()), 0);
  const int fd = ::open((step_b + "/rank_1.pt").c_str(), O_CREAT | O_WRONLY, 0644);
  EXPECT_EQ(fd, -1);
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_NE(::stat(step_a.c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
}

// The operations that reach a cached directory by its inode rather than by
// a name in its parent — opendir, getxattr, chmod — meet a directory node
// A removed and recreated as ESTALE too, and so act on the new one.
TEST_F(TwoMountsTest, OperationsOnAStaleCachedDirectoryReachTheRecreatedOne) {
  ASSERT_NO_FATAL_FAILURE(StartNodes({"--dir_timeout_s=30"}));
  ASSERT_EQ(::mkdir((a_ + "/run1").c_str(), 0755), 0);
  // Each operation gets a directory of its own that B has cached.
  const std::vector<std::string> names = {"listed", "xattr", "chmod"};
  for (const std::string& name : names) {
    ASSERT_EQ(::mkdir((a_ + "/run1/" + name).c_str(), 0755), 0);
    struct stat st {};
    ASSERT_EQ(::stat((b_ + "/run1/" + name).c_str(), &st), 0);
  }
  for (const std::string& name : names) {
    const std::string dir = a_ + "/run1/" + name;
    ASSERT_EQ(::rmdir(dir.c_str()), 0);
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  }
  ASSERT_TRUE(WriteWholeFile(a_ + "/run1/listed/rank_0.pt", "new").ok());
  ASSERT_EQ(::setxattr((a_ + "/run1/xattr").c_str(), "user.note", "new", 3, 0), 0);

  DIR* listed = ::opendir((b_ + "/run1/listed").c_str());
  ASSERT_NE(listed, nullptr) << std::strerror(errno);
  std::vector<std::string> names_seen;
  errno = 0;
  while (struct dirent* e = ::readdir(listed)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names_seen.emplace_back(e->d_name);
    }
  }
  const int readdir_errno = errno;
  ::closedir(listed);
  EXPECT_EQ(readdir_errno, 0) << std::strerror(readdir_errno);
  EXPECT_EQ(names_seen, std::vector<std::string>{"rank_0.pt"});

  char value[16] = {};
  const ssize_t n = ::getxattr((b_ + "/run1/xattr").c_str(), "user.note", value, sizeof(value));
  ASSERT_EQ(n, 3) << std::strerror(errno);
  EXPECT_EQ(std::string(value, 3), "new");

  ASSERT_EQ(::chmod((b_ + "/run1/chmod").c_str(), 0750), 0) << std::strerror(errno);
  struct stat st {};
  ASSERT_EQ(::stat((a_ + "/run1/chmod").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

// A reader's open keeps the pages its node already read while the file is
// unchanged (a broadcast load reads a shard once per node), and drops them
// once another node closed a rewrite, even one of the same size.
TEST_F(TwoMountsTest, AReaderKeepsCachedPagesOnlyWhileTheFileIsUnchanged) {
  ASSERT_NO_FATAL_FAILURE(StartNodes());
  ASSERT_EQ(::mkdir((a_ + "/run1").c_str(), 0755), 0);
  const std::string on_a = a_ + "/run1/shard.pt";
  const std::string on_b = b_ + "/run1/shard.pt";

  const std::string first = TestData((1 << 20) + 5, 1);
  ASSERT_TRUE(WriteWholeFile(on_a, first).ok());
  // The first reader of a version bypasses the page cache (FirstReads); the
  // second fills it.
  for (int reader = 0; reader < 2; ++reader) {
    auto seen = ReadWholeFile(on_b);
    ASSERT_TRUE(seen.ok()) << seen.status();
    ASSERT_TRUE(*seen == first);
  }
  auto [resident, total] = PagesCachedAfterOpen(on_b);
  ASSERT_GT(total, 0);
  EXPECT_EQ(resident, total) << "an unchanged file's pages were dropped";

  const std::string second = TestData(first.size(), 2);
  ASSERT_TRUE(WriteWholeFile(on_a, second).ok());
  std::tie(resident, total) = PagesCachedAfterOpen(on_b);
  EXPECT_EQ(resident, 0) << "a rewritten file's old pages were kept";
  auto seen = ReadWholeFile(on_b);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(*seen == second);
  std::tie(resident, total) = PagesCachedAfterOpen(on_b);
  EXPECT_EQ(resident, total);
  seen = ReadWholeFile(on_b);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(*seen == second);

  // A rewrite by this node's own writer is a change too.
  const std::string third = TestData(first.size(), 3);
  ASSERT_TRUE(WriteWholeFile(on_b, third).ok());
  seen = ReadWholeFile(on_b);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(*seen == third);
  seen = ReadWholeFile(on_a);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(*seen == third);
}

// Two nodes write disjoint halves of one chunk through handles both opened
// while the file was empty. The one that closes last still believes the
// file ends where its own write does, so the chunk's stored bytes past that
// look like nothing to it: its write must merge into them on the server,
// never replace the chunk (over TCP or by a local chunk file the server
// adopts) and drop the half the other node stored. Parameter: the mounts
// write the chunks of their (local) servers in place.
class TwoWritersOfOneChunkTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    LocalClusterOptions options;
    options.local_writes = GetParam();
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    auto a = cluster_->Mount("node_a");
    ASSERT_TRUE(a.ok()) << a.status();
    a_ = *a;
    auto b = cluster_->Mount("node_b");
    ASSERT_TRUE(b.ok()) << b.status();
    b_ = *b;
  }

  std::unique_ptr<LocalCluster> cluster_;
  std::string a_, b_;
};

TEST_P(TwoWritersOfOneChunkTest, BothHalvesOfTheChunkSurviveEitherCloseOrder) {
  constexpr size_t kHalf = 1 << 20;  // the default chunk is 4 MiB: both halves in chunk 0
  for (const bool a_closes_first : {false, true}) {
    SCOPED_TRACE(a_closes_first ? "the front half's writer closes first"
                                : "the back half's writer closes first");
    const std::string name = a_closes_first ? "/front_first.pt" : "/back_first.pt";
    ASSERT_TRUE(WriteWholeFile(a_ + name, "").ok());
    const int front = ::open((a_ + name).c_str(), O_WRONLY);
    ASSERT_GE(front, 0) << std::strerror(errno);
    const int back = ::open((b_ + name).c_str(), O_WRONLY);
    ASSERT_GE(back, 0) << std::strerror(errno);
    const std::string front_data = TestData(kHalf, 1);
    const std::string back_data = TestData(kHalf, 2);
    ASSERT_EQ(::pwrite(front, front_data.data(), kHalf, 0), static_cast<ssize_t>(kHalf));
    ASSERT_EQ(::pwrite(back, back_data.data(), kHalf, kHalf), static_cast<ssize_t>(kHalf));
    const int first = a_closes_first ? front : back;
    const int second = a_closes_first ? back : front;
    ASSERT_EQ(::close(first), 0) << std::strerror(errno);
    ASSERT_EQ(::close(second), 0) << std::strerror(errno);

    for (const std::string& mount : {a_, b_}) {
      auto seen = ReadWholeFile(mount + name);
      ASSERT_TRUE(seen.ok()) << seen.status();
      ASSERT_EQ(seen->size(), 2 * kHalf);
      EXPECT_TRUE(seen->compare(0, kHalf, front_data) == 0) << "the front half was lost";
      EXPECT_TRUE(seen->compare(kHalf, kHalf, back_data) == 0)
          << "the back half was lost (read as "
          << (seen->compare(kHalf, kHalf, std::string(kHalf, '\0')) == 0 ? "zeros" : "other bytes")
          << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LocalWrites, TwoWritersOfOneChunkTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("InPlace") : std::string("OverTcp");
                         });

}  // namespace
}  // namespace ckptfs::testing
