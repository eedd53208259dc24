// Two mounts of one cluster stand in for two training nodes: a file closed
// on one is complete when opened on the other (close-to-open), and a rename
// or unlink on one is seen by the other.
#include <sys/stat.h>
#include <unistd.h>

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

}  // namespace
}  // namespace ckptfs::testing
