// Two mounts of one cluster stand in for two training nodes: a file closed
// on one is complete when opened on the other (close-to-open), and a rename
// or unlink on one is seen by the other, also where the other caches the
// directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

TEST(TwoMountsTest, CloseToOpenAndNamespaceChangesAreSeenByTheOtherNode) {
  auto cluster = LocalCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto a = (*cluster)->Mount("node_a");
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = (*cluster)->Mount("node_b");
  ASSERT_TRUE(b.ok()) << b.status();

  ASSERT_EQ(::mkdir((*a + "/run1").c_str(), 0755), 0);
  // Node B looks first, so any cached attributes it has are of the old state.
  struct stat st {};
  EXPECT_NE(::stat((*b + "/run1/rank_0.pt").c_str(), &st), 0);

  const std::string data = TestData((9 << 20) + 3, 77);
  ASSERT_TRUE(WriteWholeFile(*a + "/run1/rank_0.pt", data).ok());
  auto seen = ReadWholeFile(*b + "/run1/rank_0.pt");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->size(), data.size());
  EXPECT_TRUE(*seen == data);

  // Overwrite on A with a shorter file; B sees exactly the new content.
  const std::string data2 = TestData(1 << 20, 78);
  ASSERT_TRUE(WriteWholeFile(*a + "/run1/rank_0.pt", data2).ok());
  seen = ReadWholeFile(*b + "/run1/rank_0.pt");
  ASSERT_TRUE(seen.ok());
  EXPECT_TRUE(*seen == data2);

  ASSERT_EQ(::rename((*a + "/run1/rank_0.pt").c_str(), (*a + "/run1/final.pt").c_str()), 0);
  EXPECT_NE(::stat((*b + "/run1/rank_0.pt").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
  seen = ReadWholeFile(*b + "/run1/final.pt");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_TRUE(*seen == data2);

  ASSERT_EQ(::unlink((*b + "/run1/final.pt").c_str()), 0);
  EXPECT_NE(::stat((*a + "/run1/final.pt").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
}

// Node B caches directories for 30 s, so every step below meets B's cached
// (stale) directory: a directory node A removed and recreated under its name
// must still be found at once on B (the metadata service answers ESTALE for
// the removed one, and B's kernel walks the path again), and a create in a
// directory that is gone must fail with ENOENT, not land anywhere. Node C
// caches names but not attributes: its stat() of the stale directory asks
// for the removed inode's attributes, which answers ESTALE as well.
TEST(TwoMountsTest, ADirectoryRecreatedOnOneNodeIsFoundAtOnceOnANodeThatCachedIt) {
  auto cluster = LocalCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto a = (*cluster)->Mount("node_a");
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = (*cluster)->Mount("node_b", {"--dir_timeout_s=30"});
  ASSERT_TRUE(b.ok()) << b.status();
  auto c = (*cluster)->Mount("node_c", {"--entry_timeout_s=30"});
  ASSERT_TRUE(c.ok()) << c.status();

  const std::string step_a = *a + "/run1/step_1";
  const std::string step_b = *b + "/run1/step_1";
  const std::string step_c = *c + "/run1/step_1";
  ASSERT_EQ(::mkdir((*a + "/run1").c_str(), 0755), 0);
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

}  // namespace
}  // namespace ckptfs::testing
