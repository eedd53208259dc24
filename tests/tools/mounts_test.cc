// Tests of mount-table parsing and mount-holder discovery (tools/mounts.h).
#include "tools/mounts.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tools/process.h"

namespace ckptfs::tools {
namespace {

TEST(MountInfoTest, ParsesFieldsEscapesAndOptionalFields) {
  const std::string text =
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
      "98 22 0:50 / /mnt/with\\040space rw,nosuid shared:7 master:2 - fuse.ckptfs "
      "ckptfs rw,user_id=0\n"
      "99 22 0:51 / /mnt/plain rw - fuse ckptfs rw\n"
      "garbage line\n";
  std::vector<MountEntry> entries = ParseMountInfo(text);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].mount_point, "/");
  EXPECT_EQ(entries[0].fs_type, "ext4");
  EXPECT_FALSE(entries[0].is_fuse());
  EXPECT_EQ(entries[1].mount_point, "/mnt/with space");
  EXPECT_EQ(entries[1].fs_type, "fuse.ckptfs");
  EXPECT_EQ(entries[1].source, "ckptfs");
  EXPECT_TRUE(entries[1].is_fuse());
  EXPECT_TRUE(entries[2].is_fuse());
}

TEST(MountInfoTest, FindsTheRootMount) {
  std::optional<MountEntry> root = FindMount("/");
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->mount_point, "/");
  EXPECT_FALSE(FindMount("/definitely/not/a/mount/point").has_value());
}

TEST(MountHoldersTest, FindsAProcessWhoseCwdIsInside) {
  char pattern[] = "/tmp/ckptfs-holders-test-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  std::filesystem::create_directory(dir + "/sub");
  auto sleeper =
      SpawnDetached({"/bin/sh", "-c", "cd " + dir + "/sub && exec sleep 30"}, dir + "/log");
  ASSERT_TRUE(sleeper.ok());
  // Until the shell has exec'd sleep: before that it is "sh", and between
  // its cd and the exec it may be seen through other links than its cwd.
  std::vector<MountHolder> holders;
  auto is_sleeper = [&](const MountHolder& h) {
    return h.pid == sleeper->pid && h.command == "sleep";
  };
  for (int i = 0; i < 250; ++i) {
    holders = FindMountHolders(dir);
    if (std::any_of(holders.begin(), holders.end(), is_sleeper)) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  const auto it = std::find_if(holders.begin(), holders.end(),
                               [&](const MountHolder& h) { return h.pid == sleeper->pid; });
  ASSERT_NE(it, holders.end());
  EXPECT_EQ(it->command, "sleep");
  EXPECT_NE(it->what.find("cwd"), std::string::npos);
  // A sibling prefix is not "inside".
  EXPECT_TRUE(FindMountHolders(dir + "/su").empty());
  ::kill(sleeper->pid, SIGKILL);
  ReapIfExited(sleeper->pid);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace ckptfs::tools
