// Tests of ckptfs-fuse-floor, the discarding FUSE filesystem the bench
// measures the FUSE floor with: writes are counted in sizes and dropped,
// reads return zeros, the namespace behaves as a file system's (the bench
// creates, truncates, renames and removes step directories on it), and the
// daemon ends cleanly on fusermount3 -u and on SIGTERM.
//
// Needs root, /dev/fuse and fusermount3; skipped otherwise. TearDown
// unmounts and kills (by pid) whatever a test left behind.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace {

const std::string kFloor = CKPTFS_FUSE_FLOOR_PATH;

// The filesystem type mounted exactly at `path`, or "" when none is.
std::string MountedType(const std::string& path) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  std::string type;
  while (std::getline(mountinfo, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mountpoint, field;
    fields >> id >> parent >> dev >> root >> mountpoint;
    if (mountpoint != path) continue;
    while (fields >> field && field != "-") {
    }
    fields >> type;  // the topmost mount at path is listed last
  }
  return type;
}

std::optional<int> WaitExit(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return std::nullopt;
}

class FuseFloorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0 ||
        std::system("command -v fusermount3 >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "needs root, /dev/fuse and fusermount3";
    }
    char dir[] = "/tmp/fuse_floor_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    mnt_ = dir_ + "/mnt";
    ASSERT_EQ(mkdir(mnt_.c_str(), 0755), 0);
  }

  void TearDown() override {
    if (!mnt_.empty() && !MountedType(mnt_).empty()) {
      (void)std::system(absl::StrCat("fusermount3 -u -z ", mnt_, " 2>/dev/null").c_str());
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) (void)std::system(absl::StrCat("rm -rf ", dir_).c_str());
  }

  // Starts the daemon on mnt_ with `flags` and waits for the mount.
  void Start(const std::vector<std::string>& flags = {}) {
    std::vector<std::string> argv = {kFloor, "--mountpoint=" + mnt_};
    argv.insert(argv.end(), flags.begin(), flags.end());
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (MountedType(mnt_) != "fuse.ckptfs-floor") {
      ASSERT_LT(absl::Now(), deadline) << "ckptfs-fuse-floor did not mount " << mnt_;
      ASSERT_EQ(waitpid(pid_, nullptr, WNOHANG), 0) << "ckptfs-fuse-floor exited";
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  std::string At(const std::string& name) const { return mnt_ + "/" + name; }

  // The daemon's exit status once it ends (nullopt: still running after 20 s).
  std::optional<int> Exit() {
    std::optional<int> status = WaitExit(pid_, absl::Seconds(20));
    if (status.has_value()) pid_ = -1;
    return status;
  }

  std::string dir_, mnt_;
  pid_t pid_ = -1;
};

off_t SizeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

TEST_F(FuseFloorTest, WritesSetTheSizeAndReadBackAsZeros) {
  ASSERT_NO_FATAL_FAILURE(Start({"--copy"}));
  ASSERT_EQ(mkdir(At("step").c_str(), 0755), 0);
  const std::string file = At("step/rank_0.pt");
  int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  const std::vector<char> piece(1 << 20, 'x');
  for (int i = 0; i < 3; ++i) ASSERT_EQ(write(fd, piece.data(), piece.size()), 1 << 20);
  ASSERT_EQ(write(fd, "tail!", 5), 5);
  ASSERT_EQ(fsync(fd), 0);
  ASSERT_EQ(close(fd), 0);
  EXPECT_EQ(SizeOf(file), (3 << 20) + 5);

  // Contents are not kept: zeros, up to the size.
  fd = open(file.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<char> back(4 << 20, 'y');
  ssize_t total = 0;
  for (ssize_t n; (n = read(fd, back.data() + total, back.size() - total)) > 0;) total += n;
  close(fd);
  ASSERT_EQ(total, (3 << 20) + 5);
  for (ssize_t i = 0; i < total; ++i) ASSERT_EQ(back[i], 0) << "byte " << i;

  // O_TRUNC and truncate(2) change the size as anywhere else.
  ASSERT_EQ(truncate(file.c_str(), 100), 0);
  EXPECT_EQ(SizeOf(file), 100);
  fd = open(file.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_EQ(SizeOf(file), 0);
}

TEST_F(FuseFloorTest, TheNamespaceBehavesAsAFileSystemDoes) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_EQ(mkdir(At("a").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(At("a/b").c_str(), 0755), 0);
  EXPECT_EQ(mkdir(At("a").c_str(), 0755), -1);
  EXPECT_EQ(errno, EEXIST);
  for (const char* name : {"a/x", "a/y"}) {
    const int fd = open(At(name).c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "1234", 4), 4);
    close(fd);
  }
  EXPECT_EQ(open(At(std::string(256, 'n')).c_str(), O_WRONLY | O_CREAT, 0644), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);

  // rename replaces a file target; a directory cannot go below itself.
  ASSERT_EQ(truncate(At("a/y").c_str(), 9), 0);
  ASSERT_EQ(rename(At("a/y").c_str(), At("a/x").c_str()), 0);
  EXPECT_EQ(SizeOf(At("a/x")), 9);
  EXPECT_EQ(SizeOf(At("a/y")), -1);
  EXPECT_EQ(rename(At("a").c_str(), At("a/b/c").c_str()), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(rename(At("a/b").c_str(), At("b").c_str()), 0);

  std::set<std::string> names;
  DIR* d = opendir(At("a").c_str());
  ASSERT_NE(d, nullptr);
  while (struct dirent* e = readdir(d)) names.insert(e->d_name);
  closedir(d);
  EXPECT_EQ(names, (std::set<std::string>{".", "..", "x"}));

  EXPECT_EQ(rmdir(At("a").c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY);
  EXPECT_EQ(unlink(At("b").c_str()), -1);
  EXPECT_EQ(errno, EISDIR);
  ASSERT_EQ(unlink(At("a/x").c_str()), 0);
  ASSERT_EQ(rmdir(At("a").c_str()), 0);
  ASSERT_EQ(rmdir(At("b").c_str()), 0);
  EXPECT_EQ(SizeOf(At("a")), -1);
}

TEST_F(FuseFloorTest, EndsWithExitZeroOnUnmountAndOnSigterm) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_EQ(std::system(absl::StrCat("fusermount3 -u ", mnt_).c_str()), 0);
  EXPECT_EQ(Exit(), 0);
  EXPECT_EQ(MountedType(mnt_), "");

  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(Exit(), 0);
  EXPECT_EQ(MountedType(mnt_), "");
}

TEST_F(FuseFloorTest, AMissingMountpointIsAnErrorNotAMount) {
  pid_ = fork();
  ASSERT_GE(pid_, 0);
  if (pid_ == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDERR_FILENO);
    execl(kFloor.c_str(), kFloor.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  EXPECT_EQ(Exit(), 1);
}

}  // namespace
