// FirstReads: the first open of each version of a file bypasses the page
// cache, the later ones share it.
#include "fuse/first_reads.h"

#include "gtest/gtest.h"

namespace ckptfs::fuse {
namespace {

const client::FileVersion kV1{100, 1000, 2000};
const client::FileVersion kV2{100, 1000, 2001};  // same size and mtime: ctime tells

TEST(FirstReadsTest, OnlyTheFirstOpenOfAVersionIsFirst) {
  FirstReads reads;
  EXPECT_TRUE(reads.IsFirst(42, kV1));
  EXPECT_FALSE(reads.IsFirst(42, kV1));
  EXPECT_FALSE(reads.IsFirst(42, kV1));
  EXPECT_TRUE(reads.IsFirst(43, kV1)) << "another file";
  EXPECT_EQ(reads.size(), 2u);
}

TEST(FirstReadsTest, ARewrittenFileIsNewAgain) {
  FirstReads reads;
  EXPECT_TRUE(reads.IsFirst(42, kV1));
  EXPECT_TRUE(reads.IsFirst(42, kV2));
  EXPECT_FALSE(reads.IsFirst(42, kV2));
}

TEST(FirstReadsTest, AFullTableStartsOver) {
  FirstReads reads;
  for (uint64_t ino = 1; ino <= FirstReads::kMaxFiles; ++ino) ASSERT_TRUE(reads.IsFirst(ino, kV1));
  EXPECT_FALSE(reads.IsFirst(1, kV1));
  EXPECT_TRUE(reads.IsFirst(FirstReads::kMaxFiles + 1, kV1));
  EXPECT_EQ(reads.size(), 1u);
  EXPECT_TRUE(reads.IsFirst(1, kV1)) << "forgotten with the rest: direct once more";
}

}  // namespace
}  // namespace ckptfs::fuse
