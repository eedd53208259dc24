// Tests of the xattr name rules and list packing (fuse/xattr_names.h).
#include "fuse/xattr_names.h"

#include <string>

#include "gtest/gtest.h"

namespace ckptfs::fuse {
namespace {

TEST(XattrNamesTest, StoredNamespaces) {
  EXPECT_TRUE(IsStoredXattrName("user.ckptfs.chunk_size"));
  EXPECT_TRUE(IsStoredXattrName("user.x"));
  EXPECT_TRUE(IsStoredXattrName("trusted.overlay"));
  EXPECT_FALSE(IsStoredXattrName("security.capability"));
  EXPECT_FALSE(IsStoredXattrName("system.posix_acl_access"));
  EXPECT_FALSE(IsStoredXattrName("user"));
  EXPECT_FALSE(IsStoredXattrName(""));
}

TEST(XattrNamesTest, PacksNulTerminatedNames) {
  EXPECT_EQ(PackXattrNames({}), "");
  EXPECT_EQ(PackXattrNames({"user.a", "user.bc"}), std::string("user.a\0user.bc\0", 15));
}

}  // namespace
}  // namespace ckptfs::fuse
