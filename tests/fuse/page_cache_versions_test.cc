// PageCacheVersions: when a read-only open may keep the kernel's pages.
#include "fuse/page_cache_versions.h"

#include "gtest/gtest.h"

namespace ckptfs::fuse {
namespace {

constexpr uint64_t kIno = 42;
const client::FileVersion kV1{100, 1000, 2000};
const client::FileVersion kV2{100, 1000, 2001};  // same size and mtime: ctime tells

TEST(PageCacheVersionsTest, AFirstOpenDropsAndALaterOneKeepsOnceTheDropIsDone) {
  PageCacheVersions versions;
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV1, /*fh=*/1));
  EXPECT_EQ(versions.dropping(), 1u);
  versions.OnHandleUsed(1);  // its first READ
  EXPECT_EQ(versions.dropping(), 0u);
  EXPECT_TRUE(versions.KeepOnOpen(kIno, kV1, 2));
  EXPECT_EQ(versions.dropping(), 0u);
}

TEST(PageCacheVersionsTest, OpensWhileTheDropMayNotHaveHappenedDropThemselves) {
  PageCacheVersions versions;
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV1, 1));
  // Handle 1's open reply is out, but its open(2) may not have dropped the
  // pages yet: a second opener must not trust them.
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV1, 2));
  versions.OnHandleUsed(2);  // RELEASE of handle 2: its drop is done
  EXPECT_TRUE(versions.KeepOnOpen(kIno, kV1, 3));
  versions.OnHandleUsed(1);
  EXPECT_EQ(versions.dropping(), 0u);
}

TEST(PageCacheVersionsTest, AChangeOnlyTheCtimeShowsDropsThePages) {
  PageCacheVersions versions;
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV1, 1));
  versions.OnHandleUsed(1);
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV2, 2));
  versions.OnHandleUsed(2);
  EXPECT_TRUE(versions.KeepOnOpen(kIno, kV2, 3));
}

TEST(PageCacheVersionsTest, AnOpenThatNeverReachedTheKernelCleansNothing) {
  PageCacheVersions versions;
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV1, 1));
  versions.Abandon(1);
  EXPECT_EQ(versions.dropping(), 0u);
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV1, 2));
}

TEST(PageCacheVersionsTest, AHandleOfAnOlderVersionDoesNotCleanANewerOne) {
  PageCacheVersions versions;
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV1, 1));
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV2, 2));
  versions.OnHandleUsed(1);  // dropped before V2's open: proves nothing for V2
  EXPECT_FALSE(versions.KeepOnOpen(kIno, kV2, 3));
}

TEST(PageCacheVersionsTest, HandlesOfOtherFilesAreIndependent) {
  PageCacheVersions versions;
  EXPECT_FALSE(versions.KeepOnOpen(1, kV1, 10));
  EXPECT_FALSE(versions.KeepOnOpen(2, kV1, 20));
  versions.OnHandleUsed(10);
  EXPECT_TRUE(versions.KeepOnOpen(1, kV1, 11));
  EXPECT_FALSE(versions.KeepOnOpen(2, kV1, 21));
  EXPECT_EQ(versions.size(), 2u);
}

TEST(PageCacheVersionsTest, UsingAHandleThatNeverDroppedIsHarmless) {
  PageCacheVersions versions;
  versions.OnHandleUsed(7);
  versions.Abandon(7);
  EXPECT_EQ(versions.dropping(), 0u);
  EXPECT_EQ(versions.size(), 0u);
}

TEST(PageCacheVersionsTest, TheTableStartsOverPastItsBound) {
  PageCacheVersions versions;
  for (uint64_t ino = 1; ino <= PageCacheVersions::kMaxFiles; ++ino) {
    versions.KeepOnOpen(ino, kV1, ino);
    versions.OnHandleUsed(ino);
  }
  EXPECT_EQ(versions.size(), PageCacheVersions::kMaxFiles);
  EXPECT_FALSE(versions.KeepOnOpen(PageCacheVersions::kMaxFiles + 1, kV1, 1));
  EXPECT_EQ(versions.size(), 1u);
  // Forgotten files drop once more; nothing is kept on a guess.
  EXPECT_FALSE(versions.KeepOnOpen(1, kV1, 2));
}

}  // namespace
}  // namespace ckptfs::fuse
