// Targets: which mount holds a directory (longest prefix, stacked mounts),
// and clear errors for directories that cannot be targets.
#include "bench/target.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

constexpr char kMountInfo[] =
    "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "30 22 0:40 / /tmp/mnt rw shared:2 - fuse.ckptfs ckptfs rw,user_id=0\n"
    "31 22 0:41 / /tmp/mn rw shared:3 - tmpfs tmpfs rw\n"
    "32 30 0:42 / /tmp/mnt rw shared:4 - fuse.other other rw\n"
    "33 22 0:43 / /data/with\\040space rw shared:5 - xfs /dev/vdb rw\n";

TEST(MountTest, LongestPrefixAndTopmost) {
  auto type = [](const std::string& path) {
    std::optional<tools::MountEntry> mount = MountIn(kMountInfo, path);
    return mount.has_value() ? mount->fs_type : std::string("none");
  };
  EXPECT_EQ(type("/home/x"), "ext4");
  EXPECT_EQ(type("/tmp/mnt"), "fuse.other");  // mounted on top
  EXPECT_EQ(type("/tmp/mnt/a/b"), "fuse.other");
  EXPECT_EQ(type("/tmp/mnt2"), "ext4");  // a prefix, but not a parent
  EXPECT_EQ(type("/tmp/mn/x"), "tmpfs");
  EXPECT_EQ(type("/data/with space/ckpt"), "xfs");
  EXPECT_EQ(MountIn(kMountInfo, "/tmp/mnt/a")->mount_point, "/tmp/mnt");
  EXPECT_FALSE(MountIn("", "/x").has_value());
}

TEST(MountTest, OwnRootIsMounted) { EXPECT_TRUE(MountOf("/").has_value()); }

TEST(DirTargetTest, ClearErrors) {
  auto missing = OpenDirTarget("A", "/no/such/dir/anywhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "directory /no/such/dir/anywhere does not exist");
  auto file = OpenDirTarget("A", "/proc/self/status");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(), "/proc/self/status is not a directory");
}

TEST(DirTargetTest, OpensADirectory) {
  char pattern[] = "/tmp/bench_target.XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  auto target = OpenDirTarget("B", std::string(pattern) + "/.");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ((*target)->root, pattern);  // resolved
  EXPECT_FALSE((*target)->fs_type.empty());
  EXPECT_FALSE((*target)->native);
  EXPECT_TRUE((*target)->executor->ranks_are_processes());
  ::rmdir(pattern);
}

}  // namespace
}  // namespace ckptfs::bench
