// CallerPermissions: the permission bits as the kernel applies them to one
// caller (owner, group member by primary or supplementary group, others,
// root), and the sticky directory's rule for deleting an entry.
#include "fuse/caller_permissions.h"

#include <sys/stat.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace ckptfs::fuse {
namespace {

meta::Attr Inode(uint32_t mode, uid_t uid, gid_t gid) {
  meta::Attr attr;
  attr.set_mode(mode);
  attr.set_uid(uid);
  attr.set_gid(gid);
  return attr;
}

Caller User(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  return Caller{uid, gid, std::move(groups)};
}

TEST(CallerPermissionsTest, EachClassGetsItsOwnBits) {
  const meta::Attr dir = Inode(S_IFDIR | 0750, 1000, 100);
  EXPECT_TRUE(MayAccess(User(1000, 1000), dir, R_OK | W_OK | X_OK));
  EXPECT_TRUE(MayAccess(User(2000, 100), dir, R_OK | X_OK));
  EXPECT_FALSE(MayAccess(User(2000, 100), dir, W_OK));
  EXPECT_TRUE(MayAccess(User(2000, 2000, {7, 100}), dir, R_OK | X_OK));  // supplementary
  EXPECT_FALSE(MayAccess(User(2000, 2000, {7}), dir, R_OK));
  EXPECT_FALSE(MayAccess(User(2000, 2000), dir, X_OK));
}

TEST(CallerPermissionsTest, TheOwnerGetsOnlyTheOwnersBits) {
  // As in the kernel: an owner whose bits lack write does not fall back to
  // the group's or the others' bits.
  const meta::Attr file = Inode(S_IFREG | 0477, 1000, 100);
  EXPECT_FALSE(MayAccess(User(1000, 100), file, W_OK));
  EXPECT_TRUE(MayAccess(User(1001, 100), file, W_OK));
}

TEST(CallerPermissionsTest, RootMayDoAllButRunWhatNobodyMay) {
  EXPECT_TRUE(MayAccess(User(0, 0), Inode(S_IFDIR | 0000, 1000, 100), R_OK | W_OK | X_OK));
  EXPECT_TRUE(MayAccess(User(0, 0), Inode(S_IFREG | 0600, 1000, 100), R_OK | W_OK));
  EXPECT_FALSE(MayAccess(User(0, 0), Inode(S_IFREG | 0600, 1000, 100), X_OK));
  EXPECT_TRUE(MayAccess(User(0, 0), Inode(S_IFREG | 0001, 1000, 100), X_OK));
}

TEST(CallerPermissionsTest, DeletingNeedsWriteAndSearchOnTheDirectory) {
  const meta::Attr entry = Inode(S_IFREG | 0644, 0, 0);
  EXPECT_TRUE(MayDeleteEntry(User(2000, 2000), Inode(S_IFDIR | 0777, 0, 0), entry));
  EXPECT_FALSE(MayDeleteEntry(User(2000, 2000), Inode(S_IFDIR | 0755, 0, 0), entry));
  EXPECT_FALSE(MayDeleteEntry(User(2000, 2000), Inode(S_IFDIR | 0776, 0, 0), entry));
}

TEST(CallerPermissionsTest, AStickyDirectoryLetsOnlyOwnersDelete) {
  const meta::Attr tmp = Inode(S_IFDIR | 01777, 0, 0);
  EXPECT_FALSE(MayDeleteEntry(User(2000, 2000), tmp, Inode(S_IFDIR | 0777, 3000, 3000)));
  EXPECT_TRUE(MayDeleteEntry(User(2000, 2000), tmp, Inode(S_IFDIR | 0700, 2000, 2000)));
  EXPECT_TRUE(MayDeleteEntry(User(2000, 2000), Inode(S_IFDIR | 01777, 2000, 0),
                             Inode(S_IFREG | 0600, 3000, 3000)));  // owns the directory
  EXPECT_TRUE(MayDeleteEntry(User(0, 0), tmp, Inode(S_IFREG | 0600, 3000, 3000)));
}

TEST(CallerPermissionsTest, MessagesNameTheCallerAndTheBits) {
  EXPECT_EQ(DescribeCaller(User(65534, 65534)), "uid 65534 (gid 65534)");
  EXPECT_EQ(DescribeOwnership(Inode(S_IFDIR | 01755, 0, 4)), "mode 1755, owner uid 0 gid 4");
}

}  // namespace
}  // namespace ckptfs::fuse
