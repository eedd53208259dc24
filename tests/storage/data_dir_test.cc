// The data directory helpers: mkdir -p, the exclusive LOCK, and the server
// identity file.
#include "server/storage/data_dir.h"

#include <cerrno>
#include <fstream>
#include <string>

#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

TEST(DataDirTest, CreateDirectoriesMakesEveryLevelAndIsIdempotent) {
  TempDir dir;
  const std::string deep = dir.path() + "/a/b/c";
  ASSERT_TRUE(CreateDirectories(deep).ok());
  ASSERT_TRUE(CreateDirectories(deep).ok());
  ASSERT_TRUE(CreateDirectories(deep + "/").ok());
  std::ofstream(dir.path() + "/file") << "x";
  EXPECT_EQ(ErrnoFromStatus(CreateDirectories(dir.path() + "/file")), ENOTDIR);
  EXPECT_FALSE(CreateDirectories(dir.path() + "/file/sub").ok());
}

TEST(DataDirTest, LockIsExclusiveUntilReleased) {
  TempDir dir;
  {
    auto first = DataDirLock::Acquire(dir.path());
    ASSERT_TRUE(first.ok()) << first.status();
    auto second = DataDirLock::Acquire(dir.path());
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(ErrnoFromStatus(second.status()), EBUSY);
    EXPECT_NE(second.status().message().find(dir.path()), absl::string_view::npos);
    EXPECT_NE(second.status().message().find("pid"), absl::string_view::npos);
  }
  EXPECT_TRUE(DataDirLock::Acquire(dir.path()).ok());
}

TEST(DataDirTest, ServerUuidIsCreatedOnceAndKept) {
  TempDir dir;
  auto uuid = LoadOrCreateServerUuid(dir.path());
  ASSERT_TRUE(uuid.ok()) << uuid.status();
  EXPECT_EQ(uuid->size(), 36u);
  EXPECT_EQ((*uuid)[14], '4');  // version 4
  auto again = LoadOrCreateServerUuid(dir.path());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *uuid);
  TempDir other;
  EXPECT_NE(*LoadOrCreateServerUuid(other.path()), *uuid);
}

TEST(DataDirTest, ADamagedUuidFileIsAnErrorNotANewIdentity) {
  TempDir dir;
  std::ofstream(dir.path() + "/server.uuid") << "garbage\n";
  auto uuid = LoadOrCreateServerUuid(dir.path());
  ASSERT_FALSE(uuid.ok());
  EXPECT_EQ(ErrnoFromStatus(uuid.status()), EIO);
}

}  // namespace
}  // namespace ckptfs::storage
