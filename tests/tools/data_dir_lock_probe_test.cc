// Tests of telling a storage server by the lock on its data directory
// (tools/data_dir_lock_probe.h). Forked children stand in for the server: they
// lock <dir>/LOCK as ckptfs-storage does (flock, OFD read lock, pid in the
// file) and wait; another only keeps the file open, as a client on the host
// that probes the running-lock does. Others hold the lock where no fd table
// of their pid shows it: through a second thread after the main thread has
// exited, or only through an fd in flight in a unix socket (no fd table at
// all), the stand-in for a holder we cannot see for a while.
#include "tools/data_dir_lock_probe.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
  // The main thread exits and a second thread keeps the locks (clone(2)
  // with CLONE_THREAD: no pthreads in a forked child).
  bool thread_holds = false;
  // The fd goes into a unix socket's queue (SCM_RIGHTS) and is closed: the
  // locks stay with the open file, which no fd table shows. Released after
  // `in_flight_ms` (0: never).
  bool in_flight = false;
  int in_flight_ms = 0;

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
  static LockStyle ThreadHolds() {
    LockStyle s;
    s.thread_holds = true;
    return s;
  }
  static LockStyle InFlight(int release_after_ms) {
    LockStyle s;
    s.in_flight = true;
    s.in_flight_ms = release_after_ms;
    s.write_pid = false;
    return s;
  }
};

// The second thread of a ThreadHolds stand-in (in the forked child, which
// has its own copy).
alignas(64) char g_thread_stack[64 * 1024];
int HoldingThread(void*) {
  while (true) ::pause();
}

// Passes `fd` into a unix socket's own queue and keeps the socket; the fd
// can be closed then. Async-signal-safe. False on failure.
bool SendToSelf(int fd) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0) return false;
  char byte = 'x';
  struct iovec iov {
    &byte, 1
  };
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  __builtin_memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  return ::sendmsg(sv[0], &msg, 0) == 1;
}

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
      if (style.thread_holds) {
        constexpr int kThread =
            CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
        if (::clone(HoldingThread, g_thread_stack + sizeof(g_thread_stack), kThread, nullptr) < 0) {
          ::_exit(4);
        }
        (void)::write(ready[1], "x", 1);
        ::syscall(SYS_exit, 0);  // this thread only: the process lives on
      }
      if (style.in_flight) {
        if (!SendToSelf(fd)) ::_exit(5);
        ::close(fd);
      }
      (void)::write(ready[1], "x", 1);
      if (style.in_flight_ms > 0) {
        struct timespec t {
          style.in_flight_ms / 1000, (style.in_flight_ms % 1000) * 1000000L
        };
        ::nanosleep(&t, nullptr);
        ::_exit(0);  // the socket, and the file in it, go
      }
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

  // The state letter in /proc/<pid>/stat ('?' if none).
  static char State(pid_t pid) {
    std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(in, line)) return '?';
    const size_t close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
  }

  // Writes `pid` into LOCK, as a server does with its own.
  void WritePid(pid_t pid) { std::ofstream(dir_ + "/LOCK") << pid << "\n"; }

  std::string dir_;
  std::vector<pid_t> children_;
};

TEST_F(DataDirLockProbeTest, NoLockFileMeansNoServer) {
  EXPECT_FALSE(*DataDirLocked(dir_));
  EXPECT_FALSE(*DataDirLocked(dir_ + "/no-such-dir"));
  EXPECT_TRUE(DataDirLockHolders(dir_).empty());
  absl::StatusOr<DataDirRelease> release = EnsureDataDirReleased(dir_, absl::Seconds(1));
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_TRUE(release->released);
  EXPECT_TRUE(release->stopped.empty());
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

  // No pid in the file either, and /proc/locks shows none for OFD locks;
  // the fdinfo of its fd does.
  const pid_t ofd_only = StandIn(LockStyle::OfdOnlyNoPid());
  ASSERT_GT(ofd_only, 0);
  ASSERT_EQ(::truncate((dir_ + "/LOCK").c_str(), 0), 0);
  EXPECT_TRUE(*DataDirLocked(dir_));
  EXPECT_EQ(DataDirLockHolders(dir_), std::vector<pid_t>{ofd_only});
  absl::StatusOr<DataDirRelease> release = EnsureDataDirReleased(dir_, absl::Seconds(1));
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_TRUE(release->released) << release->still_held;
  EXPECT_EQ(release->stopped, std::vector<pid_t>{ofd_only});
  EXPECT_FALSE(Alive(ofd_only));
}

// The pid in LOCK is no evidence: here it names a client that only keeps
// the file open (a stale pid can, too).
TEST_F(DataDirLockProbeTest, TheHolderIsStoppedAndAProcessThatOnlyOpensTheFileIsNot) {
  const pid_t server = StandIn(LockStyle::Server());
  ASSERT_GT(server, 0);
  const pid_t prober = StandIn(LockStyle::OpenOnly());
  ASSERT_GT(prober, 0);
  WritePid(prober);
  EXPECT_TRUE(*DataDirLocked(dir_));
  EXPECT_EQ(DataDirLockHolders(dir_), std::vector<pid_t>{server});

  absl::StatusOr<DataDirRelease> release = EnsureDataDirReleased(dir_, absl::Seconds(5));
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_TRUE(release->released) << release->still_held;
  EXPECT_EQ(release->stopped, std::vector<pid_t>{server});
  EXPECT_FALSE(Alive(server));
  EXPECT_TRUE(Alive(prober));
  EXPECT_FALSE(*DataDirLocked(dir_));
}

// The lock is held where no process shows it, and LOCK names a process that
// only has the file open: that process is never taken for the holder. The
// message points at tools that show lock holders, not `fuser` alone.
TEST_F(DataDirLockProbeTest, AProcessThatOnlyOpensTheFileIsNeverStoppedForAnUnseenHolder) {
  const pid_t holder = StandIn(LockStyle::InFlight(0));
  ASSERT_GT(holder, 0);
  const pid_t prober = StandIn(LockStyle::OpenOnly());
  ASSERT_GT(prober, 0);
  WritePid(prober);
  ASSERT_TRUE(*DataDirLocked(dir_));
  EXPECT_TRUE(DataDirLockHolders(dir_).empty());
  absl::StatusOr<DataDirRelease> release = EnsureDataDirReleased(dir_, absl::Seconds(1));
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_FALSE(release->released);
  EXPECT_TRUE(release->stopped.empty());
  EXPECT_TRUE(absl::StrContains(release->still_held, "still runs on " + dir_))
      << release->still_held;
  EXPECT_TRUE(absl::StrContains(release->still_held, "lslocks")) << release->still_held;
  EXPECT_TRUE(Alive(prober));
  EXPECT_TRUE(Alive(holder));  // never guessed at
  EXPECT_TRUE(*DataDirLocked(dir_));
}

// A lock whose holder does not show (a SIGKILLed server's threads still
// exiting, say) is waited for a while before it counts as held.
TEST_F(DataDirLockProbeTest, ALockHeldOutOfSightIsWaitedForBeforeItCountsAsHeld) {
  const pid_t holder = StandIn(LockStyle::InFlight(700));
  ASSERT_GT(holder, 0);
  ASSERT_TRUE(*DataDirLocked(dir_));
  EXPECT_TRUE(DataDirLockHolders(dir_).empty());
  absl::StatusOr<DataDirRelease> release = EnsureDataDirReleased(dir_, absl::Seconds(1));
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_TRUE(release->released) << release->still_held;
  EXPECT_TRUE(release->stopped.empty());
}

// A process whose main thread has exited (a zombie) while another thread
// still holds the lock: found through that thread's fds, counted as running
// and stopped.
TEST_F(DataDirLockProbeTest, AHolderWhoseMainThreadHasExitedIsFoundAndStopped) {
  const pid_t server = StandIn(LockStyle::ThreadHolds());
  ASSERT_GT(server, 0);
  for (int i = 0; i < 500 && State(server) != 'Z'; ++i) absl::SleepFor(absl::Milliseconds(2));
  ASSERT_EQ(State(server), 'Z') << "the main thread never exited";
  ASSERT_TRUE(*DataDirLocked(dir_));
  EXPECT_TRUE(Alive(server));  // a zombie main thread with a live thread
  EXPECT_EQ(DataDirLockHolders(dir_), std::vector<pid_t>{server});
  absl::StatusOr<DataDirRelease> release = EnsureDataDirReleased(dir_, absl::Seconds(1));
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_TRUE(release->released) << release->still_held;
  EXPECT_EQ(release->stopped, std::vector<pid_t>{server});
  EXPECT_FALSE(Alive(server));
}

TEST_F(DataDirLockProbeTest, AHolderThatIgnoresSigtermIsKilled) {
  const pid_t server = StandIn(LockStyle::IgnoresSigterm());
  ASSERT_GT(server, 0);
  absl::StatusOr<DataDirRelease> release = EnsureDataDirReleased(dir_, absl::Milliseconds(200));
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_TRUE(release->released) << release->still_held;
  EXPECT_EQ(release->stopped, std::vector<pid_t>{server});
  EXPECT_FALSE(Alive(server));
  EXPECT_FALSE(*DataDirLocked(dir_));
}

// A LOCK that cannot be probed is an error, not "stopped" and not "running".
TEST_F(DataDirLockProbeTest, ALockThatCannotBeProbedIsAnError) {
  std::ofstream(dir_ + "/file") << "x";
  absl::StatusOr<DataDirRelease> release =
      EnsureDataDirReleased(dir_ + "/file", absl::Milliseconds(100));  // ENOTDIR
  EXPECT_FALSE(release.ok());
}

}  // namespace
}  // namespace ckptfs::tools
