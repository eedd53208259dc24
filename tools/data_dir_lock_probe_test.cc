// Tests of telling a storage server by the lock on its data directory
// (data_dir_lock_probe.h). Forked children stand in for the server: they
// lock <dir>/LOCK as ckptfs-storage does (flock, OFD read lock, pid in the
// file) and wait; another only keeps the file open, as a client on the host
// that probes the running-lock does.
#include "tools/data_dir_lock_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/process.h"

namespace ckptfs::tools {
namespace {

// How a stand-in treats <dir>/LOCK.
struct LockStyle {
  bool flock = true;         // flock(LOCK_EX), as every server does
  bool ofd = true;           // OFD read lock: the running-lock
  bool write_pid = true;     // its pid into the file
  bool ignore_term = false;  // SIGTERM blocked: only SIGKILL stops it
  bool open_only = false;    // none of the above: keeps the file open

  static LockStyle Server() { return {}; }
  static LockStyle FlockOnly() {
    LockStyle s;
    s.ofd = false;
    return s;
  }
  static LockStyle OfdOnlyNoPid() {
    LockStyle s;
    s.flock = false;
    s.write_pid = false;
    return s;
  }
  static LockStyle IgnoresSigterm() {
    LockStyle s;
    s.ignore_term = true;
    return s;
  }
  static LockStyle OpenOnly() {
    LockStyle s;
    s.open_only = true;
    return s;
  }
};

class DataDirLockProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ckptfs-lock-probe-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  void TearDown() override {
    for (pid_t pid : children_) {
      // Only a child not reaped yet (the code under test reaps those it
      // stops): its pid cannot have been reused.
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) != 0) continue;
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, &status, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Forks a stand-in; returns once it has done what `style` says.
  pid_t StandIn(LockStyle style) {
    int ready[2];
    if (::pipe(ready) != 0) return -1;
    const std::string path = dir_ + "/LOCK";
    const pid_t pid = ::fork();
    if (pid == 0) {  // async-signal-safe calls only
      ::close(ready[0]);
      if (style.ignore_term) {
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(SIG_BLOCK, &term, nullptr);
      }
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
      if (fd < 0) ::_exit(1);
      if (!style.open_only) {
        if (style.flock && ::flock(fd, LOCK_EX | LOCK_NB) != 0) ::_exit(2);
        struct flock running {};
        running.l_type = F_RDLCK;
        running.l_whence = SEEK_SET;
        if (style.ofd && ::fcntl(fd, F_OFD_SETLK, &running) != 0) ::_exit(3);
      }
      (void)::write(ready[1], "x", 1);
      while (true) ::pause();
    }
    ::close(ready[1]);
    char byte = 0;
    const bool ok = pid > 0 && ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    if (pid > 0) children_.push_back(pid);
    // The pid in the file, as the server writes it (who writes it does not
    // matter to a reader).
    if (ok && style.write_pid && !style.open_only) std::ofstream(path) << pid << "\n";
    return ok ? pid : -1;
  }

  // Alive and not a zombie (children are reaped by StopProcesses).
  static bool Alive(pid_t pid) { return CurrentProcessRecord(pid).ok(); }

  std::string dir_;
  std::vector<pid_t> children_;
};

TEST_F(DataDirLockProbeTest, NoLockFileMeansNoServer) {
  EXPECT_FALSE(*DataDirLocked(dir_));
  EXPECT_FALSE(*DataDirLocked(dir_ + "/no-such-dir"));
  EXPECT_TRUE(DataDirLockHolders(dir_).empty());
  absl::StatusOr<std::vector<pid_t>> released = EnsureDataDirReleased(dir_, absl::Seconds(1));
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_TRUE(released->empty());
}

TEST_F(DataDirLockProbeTest, AnUnlockedFileLeftByAnExitedServerMeansNoServer) {
  const pid_t server = StandIn(LockStyle::Server());
  ASSERT_GT(server, 0);
  ASSERT_TRUE(*DataDirLocked(dir_));
  ::kill(server, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(server, &status, 0), server);
  EXPECT_FALSE(*DataDirLocked(dir_));  // the file and its pid stay; the locks do not
  EXPECT_TRUE(DataDirLockHolders(dir_).empty());
}

TEST_F(DataDirLockProbeTest, EitherLockTellsThatAServerRuns) {
  const pid_t flock_only = StandIn(LockStyle::FlockOnly());
  ASSERT_GT(flock_only, 0);
  EXPECT_TRUE(*DataDirLocked(dir_));
  EXPECT_EQ(DataDirLockHolders(dir_), std::vector<pid_t>{flock_only});
  ::kill(flock_only, SIGKILL);
  (void)::waitpid(flock_only, nullptr, 0);
  ASSERT_FALSE(*DataDirLocked(dir_));

  // No pid in the file either: /proc/locks has none for OFD locks, so the
  // holder cannot be named, but the lock is still seen.
  const pid_t ofd_only = StandIn(LockStyle::OfdOnlyNoPid());
  ASSERT_GT(ofd_only, 0);
  ASSERT_EQ(::truncate((dir_ + "/LOCK").c_str(), 0), 0);
  EXPECT_TRUE(*DataDirLocked(dir_));
  EXPECT_TRUE(DataDirLockHolders(dir_).empty());
  absl::StatusOr<std::vector<pid_t>> released = EnsureDataDirReleased(dir_, absl::Seconds(1));
  ASSERT_FALSE(released.ok());
  EXPECT_NE(released.status().message().find("still runs on " + dir_), std::string::npos)
      << released.status();
  EXPECT_TRUE(Alive(ofd_only));  // never guessed at
}

TEST_F(DataDirLockProbeTest, TheHolderIsStoppedAndAProcessThatOnlyOpensTheFileIsNot) {
  const pid_t server = StandIn(LockStyle::Server());
  ASSERT_GT(server, 0);
  const pid_t prober = StandIn(LockStyle::OpenOnly());
  ASSERT_GT(prober, 0);
  EXPECT_TRUE(*DataDirLocked(dir_));
  EXPECT_EQ(DataDirLockHolders(dir_), std::vector<pid_t>{server});

  absl::StatusOr<std::vector<pid_t>> released = EnsureDataDirReleased(dir_, absl::Seconds(5));
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(*released, std::vector<pid_t>{server});
  EXPECT_FALSE(Alive(server));
  EXPECT_TRUE(Alive(prober));
  EXPECT_FALSE(*DataDirLocked(dir_));
}

TEST_F(DataDirLockProbeTest, AHolderThatIgnoresSigtermIsKilled) {
  const pid_t server = StandIn(LockStyle::IgnoresSigterm());
  ASSERT_GT(server, 0);
  absl::StatusOr<std::vector<pid_t>> released =
      EnsureDataDirReleased(dir_, absl::Milliseconds(200));
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(*released, std::vector<pid_t>{server});
  EXPECT_FALSE(Alive(server));
  EXPECT_FALSE(*DataDirLocked(dir_));
}

}  // namespace
}  // namespace ckptfs::tools
