// Who may change a checkpoint through a mount: the permission bits decide,
// as for the equivalent file operations. On root's mount (allow_other),
// another local user (a child that drops to uid and gid 65534) can read
// the state of root's 0755 checkpoint but cannot commit a rank of it
// (neither by getxattr user.ckptfs.commit.R nor by setxattr), declare a
// directory of root's a checkpoint, change a run directory's keep or
// remove root's checkpoint: each is EACCES (EPERM for a sticky
// directory's rule) and nothing changes. It can remove a checkpoint it
// may empty, and do all of it on its own. Retention set by root takes
// only the checkpoints of the user whose commit applies it.
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "gtest/gtest.h"
#include "tests/integration/as_nobody.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

// 0, or the errno of a call that returned -1.
int ErrnoOf(ssize_t rc) { return rc < 0 ? errno : 0; }

int SetX(const std::string& path, const char* name, const std::string& value) {
  return ErrnoOf(::setxattr(path.c_str(), name, value.data(), value.size(), 0));
}

// The value of `name` at `path`, or "<errno E>".
std::string GetX(const std::string& path, const std::string& name) {
  char buf[4096];
  const ssize_t n = ::getxattr(path.c_str(), name.c_str(), buf, sizeof(buf));
  if (n < 0) return "<errno " + std::to_string(errno) + ">";
  return std::string(buf, static_cast<size_t>(n));
}

// A commit of rank `rank` made as a read: 0 or its errno.
int CommitRank(const std::string& ckpt, int rank) {
  char buf[64];
  const std::string name = "user.ckptfs.commit." + std::to_string(rank);
  return ErrnoOf(::getxattr(ckpt.c_str(), name.c_str(), buf, sizeof(buf)));
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

int Mkdir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0) return errno;
  return ErrnoOf(::chmod(path.c_str(), mode));  // past the umask
}

// `ckpt` made, declared one rank, given a file and committed, by whoever
// calls it: 0, or the errno of the step that failed.
int CommittedCheckpoint(const std::string& ckpt, mode_t mode) {
  if (int err = Mkdir(ckpt, mode); err != 0) return err;
  if (int err = SetX(ckpt, "user.ckptfs.ranks", "1"); err != 0) return err;
  if (!WriteWholeFile(ckpt + "/model.pt", "weights").ok()) return EIO;
  return CommitRank(ckpt, 0);
}

// `ckpt` (mode `mode`) holding subdirectory "sub" (mode `sub_mode`) with a
// file in it, committed by root.
void CommittedWithSubdirectory(const std::string& ckpt, mode_t mode, mode_t sub_mode) {
  ASSERT_EQ(Mkdir(ckpt, mode), 0);
  ASSERT_EQ(SetX(ckpt, "user.ckptfs.ranks", "1"), 0);
  ASSERT_EQ(Mkdir(ckpt + "/sub", sub_mode), 0);
  ASSERT_TRUE(WriteWholeFile(ckpt + "/sub/state.pt", "state").ok());
  ASSERT_TRUE(WriteWholeFile(ckpt + "/model.pt", "weights").ok());
  ASSERT_EQ(CommitRank(ckpt, 0), 0);
}

bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

class CheckpointAccessTest : public MountedClusterTest {
 protected:
  void SetUp() override {
    MountedClusterTest::SetUp();
    if (HasFatalFailure()) return;
    // Other users reach the test's directory (the cluster's directory is
    // root's own, 0700, until here).
    ASSERT_EQ(::chmod(cluster().root().c_str(), 0711), 0) << std::strerror(errno);
    ASSERT_EQ(::chmod(TestDir().c_str(), 0777), 0) << std::strerror(errno);
  }

  std::string Path(const std::string& name) const { return TestDir() + "/" + name; }
};

TEST_F(CheckpointAccessTest, AnotherUserCanReadButNotChangeACheckpoint) {
  const std::string run = Path("run");
  const std::string ckpt = run + "/ckpt";
  const std::string plain = run + "/plain";
  ASSERT_EQ(Mkdir(run, 0755), 0);
  ASSERT_EQ(Mkdir(ckpt, 0755), 0);
  ASSERT_EQ(Mkdir(plain, 0755), 0);
  // A failing test ends rank 0's wait within 30 s.
  ASSERT_EQ(SetX(ckpt, "user.ckptfs.commit_timeout_s", "30"), 0);
  ASSERT_EQ(SetX(ckpt, "user.ckptfs.ranks", "2"), 0);
  ASSERT_TRUE(WriteWholeFile(ckpt + "/rank0.pt", "rank 0").ok());
  // Rank 0 arrives and waits for rank 1.
  int rank0 = -1;
  std::thread waiting([&] { rank0 = CommitRank(ckpt, 0); });
  absl::Cleanup join = [&] { waiting.join(); };
  ASSERT_TRUE(Eventually([&] {
    return GetX(ckpt, "user.ckptfs.info").find("arrived=1") != std::string::npos;
  })) << GetX(ckpt, "user.ckptfs.info");

  // Reading the state is allowed...
  EXPECT_EQ(AsNobody([&] { return GetX(ckpt, "user.ckptfs.state") == "pending" ? 0 : 1; }), 0);
  // ...changing it is not.
  EXPECT_EQ(AsNobody([&] { return CommitRank(ckpt, 1); }), EACCES);
  EXPECT_EQ(AsNobody([&] { return SetX(ckpt, "user.ckptfs.commit", "1"); }), EACCES);
  EXPECT_EQ(AsNobody([&] { return SetX(plain, "user.ckptfs.ranks", "1"); }), EACCES);
  EXPECT_EQ(AsNobody([&] { return SetX(run, "user.ckptfs.keep", "1"); }), EACCES);
  EXPECT_EQ(AsNobody([&] { return SetX(run, "user.ckptfs.remove", "ckpt"); }), EACCES);
  EXPECT_EQ(AsNobody([&] { return CommittedCheckpoint(run + "/theirs", 0755); }), EACCES);

  // Nothing changed.
  EXPECT_EQ(GetX(ckpt, "user.ckptfs.state"), "pending");
  EXPECT_NE(GetX(ckpt, "user.ckptfs.info").find("arrived=1"), std::string::npos);
  EXPECT_EQ(GetX(plain, "user.ckptfs.state"), "<errno " + std::to_string(ENODATA) + ">");
  EXPECT_EQ(GetX(run, "user.ckptfs.keep"), "<errno " + std::to_string(ENODATA) + ">");
  EXPECT_TRUE(Exists(ckpt + "/rank0.pt"));

  // Rank 1 of root's job commits it.
  ASSERT_TRUE(WriteWholeFile(ckpt + "/rank1.pt", "rank 1").ok());
  EXPECT_EQ(CommitRank(ckpt, 1), 0);
  std::move(join).Invoke();
  EXPECT_EQ(rank0, 0);
  EXPECT_EQ(GetX(ckpt, "user.ckptfs.state"), "committed");
}

TEST_F(CheckpointAccessTest, RemovingACheckpointNeedsTheRightToDeleteEverythingInIt) {
  // A run directory everyone may write (not sticky): the kernel lets
  // anyone set user.ckptfs.remove on it; the mount checks the rest.
  const std::string run = Path("run");
  ASSERT_EQ(Mkdir(run, 0777), 0);
  ASSERT_EQ(CommittedCheckpoint(run + "/closed", 0755), 0);
  EXPECT_EQ(AsNobody([&] { return SetX(run, "user.ckptfs.remove", "closed"); }), EACCES);
  EXPECT_EQ(GetX(run + "/closed", "user.ckptfs.state"), "committed");
  EXPECT_TRUE(Exists(run + "/closed/model.pt"));

  // Open at the top, closed below: still refused, at the directory below.
  const std::string deep = run + "/deep";
  ASSERT_NO_FATAL_FAILURE(CommittedWithSubdirectory(deep, 0777, 0755));
  EXPECT_EQ(AsNobody([&] { return SetX(run, "user.ckptfs.remove", "deep"); }), EACCES);
  EXPECT_EQ(GetX(deep, "user.ckptfs.state"), "committed");

  // A sticky directory in it: only the owners of its entries may delete them.
  const std::string sticky = run + "/sticky";
  ASSERT_NO_FATAL_FAILURE(CommittedWithSubdirectory(sticky, 0777, 01777));
  EXPECT_EQ(AsNobody([&] { return SetX(run, "user.ckptfs.remove", "sticky"); }), EPERM);
  EXPECT_TRUE(Exists(sticky + "/sub/state.pt"));

  // Everything in it deletable by anyone: anyone may remove it.
  const std::string open = run + "/open";
  ASSERT_NO_FATAL_FAILURE(CommittedWithSubdirectory(open, 0777, 0777));
  EXPECT_EQ(AsNobody([&] { return SetX(run, "user.ckptfs.remove", "open"); }), 0);
  EXPECT_FALSE(Exists(open));

  // Its own checkpoint, whatever is in it: the owner may remove it; and
  // root may remove anyone's.
  EXPECT_EQ(AsNobody([&] { return CommittedCheckpoint(run + "/own", 0700); }), 0);
  struct stat own {};
  ASSERT_EQ(::stat((run + "/own").c_str(), &own), 0);
  // Naming another inode (NAME/INO/STATE) removes nothing: the removal is
  // of the checkpoint checked.
  EXPECT_EQ(AsNobody([&] {
              return SetX(run, "user.ckptfs.remove",
                          "own/" + std::to_string(own.st_ino + 1000) + "/committed");
            }),
            ESTALE);
  EXPECT_EQ(AsNobody([&] {
              return SetX(run, "user.ckptfs.remove",
                          "own/" + std::to_string(own.st_ino) + "/committed");
            }),
            0);
  EXPECT_FALSE(Exists(run + "/own"));
  EXPECT_EQ(AsNobody([&] { return CommittedCheckpoint(run + "/own2", 0700); }), 0);
  EXPECT_EQ(SetX(run, "user.ckptfs.remove", "own2"), 0);
  EXPECT_FALSE(Exists(run + "/own2"));
  EXPECT_EQ(SetX(run, "user.ckptfs.remove", "closed"), 0);
  EXPECT_FALSE(Exists(run + "/closed"));
}

TEST_F(CheckpointAccessTest, RetentionTakesOnlyTheCommittingUsersCheckpoints) {
  const std::string run = Path("run");
  ASSERT_EQ(Mkdir(run, 0777), 0);
  ASSERT_EQ(SetX(run, "user.ckptfs.keep", "1"), 0);
  EXPECT_EQ(AsNobody([&] { return CommittedCheckpoint(run + "/nobody1", 0755); }), 0);
  ASSERT_EQ(CommittedCheckpoint(run + "/root1", 0755), 0);
  EXPECT_EQ(AsNobody([&] { return CommittedCheckpoint(run + "/nobody2", 0755); }), 0);
  EXPECT_TRUE(Eventually([&] { return !Exists(run + "/nobody1"); }));
  // Retention runs after the commit's answer; a second is plenty for it to
  // have taken root1 if it were going to.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(GetX(run + "/root1", "user.ckptfs.state"), "committed");
  ASSERT_EQ(CommittedCheckpoint(run + "/root2", 0755), 0);
  EXPECT_TRUE(Eventually([&] { return !Exists(run + "/root1"); }));
  EXPECT_EQ(GetX(run + "/nobody2", "user.ckptfs.state"), "committed");
}

}  // namespace
}  // namespace ckptfs::testing
