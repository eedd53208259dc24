// The data directory helpers: mkdir -p, the exclusive LOCK (which no other
// local user may open, let alone lock), and the server identity file.
#include "server/storage/data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/integration/as_nobody.h"
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

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// Another local user can neither lock the LOCK file (which would keep the
// server from starting, or make a dead server look alive to the clients
// that probe it) nor replace it, even where the directory had been left
// open to everyone and the LOCK was theirs.
TEST(DataDirTest, NoOtherUserCanLockOrReplaceTheLockFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (to act as another user)";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // others may reach the data directory
  const std::string data_dir = dir.path() + "/data";
  ASSERT_EQ(::mkdir(data_dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(data_dir.c_str(), 0777), 0);
  const std::string lock = data_dir + "/LOCK";
  std::ofstream(lock) << "planted\n";
  ASSERT_EQ(::chmod(lock.c_str(), 0666), 0);
  ASSERT_EQ(::chown(lock.c_str(), testing::kNobody, testing::kNobody), 0);

  auto claimed = DataDirLock::Acquire(data_dir);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_EQ(ModeOf(data_dir) & 022, 0u) << "mode " << std::oct << ModeOf(data_dir);
  EXPECT_EQ(ModeOf(lock), 0600u);
  struct stat st {};
  ASSERT_EQ(::stat(lock.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "the planted LOCK was kept";
  EXPECT_EQ(testing::AsNobody([&] {
              if (::open(lock.c_str(), O_RDONLY) >= 0 || errno != EACCES) return 1;
              if (::unlink(lock.c_str()) == 0 || errno != EACCES) return 2;
              const std::string other = data_dir + "/LOCK.new";
              if (::open(other.c_str(), O_WRONLY | O_CREAT, 0666) >= 0 || errno != EACCES) return 3;
              return 0;
            }),
            0);
}

// A LOCK of another user that a process holds may be a server of this
// directory running as that user: it is left alone, and the claim is EBUSY.
TEST(DataDirTest, AHeldLockFileOfAnotherUserIsNotReplaced) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (to give the file to another user)";
  TempDir dir;
  const std::string lock = dir.path() + "/LOCK";
  std::ofstream(lock) << "other\n";
  ASSERT_EQ(::chown(lock.c_str(), testing::kNobody, testing::kNobody), 0);
  const int holder = ::open(lock.c_str(), O_RDONLY);
  ASSERT_GE(holder, 0);
  ASSERT_EQ(::flock(holder, LOCK_SH), 0);
  struct stat before {};
  ASSERT_EQ(::stat(lock.c_str(), &before), 0);
  auto claimed = DataDirLock::Acquire(dir.path());
  ASSERT_FALSE(claimed.ok());
  EXPECT_EQ(ErrnoFromStatus(claimed.status()), EBUSY);
  EXPECT_NE(claimed.status().message().find("another ckptfs-storage"), absl::string_view::npos)
      << claimed.status();
  struct stat after {};
  ASSERT_EQ(::stat(lock.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the held LOCK was replaced";
  ::close(holder);
}

// A LOCK made by an older server (0644) is made private on the next claim.
TEST(DataDirTest, AnOlderLockFileIsMadePrivate) {
  TempDir dir;
  const std::string lock = dir.path() + "/LOCK";
  std::ofstream(lock) << "1\n";
  ASSERT_EQ(::chmod(lock.c_str(), 0644), 0);
  auto claimed = DataDirLock::Acquire(dir.path());
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_EQ(ModeOf(lock), 0600u);
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
