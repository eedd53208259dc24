// Tests of the ckptfs-fuse executable's contract with its callers (ckptfs
// up, ckptfs mount, scripts): exit codes and messages for bad mountpoints
// and an unreachable metadata service, daemon mode returning 0 only with the
// mount live, and a clean exit 0 with the mount gone after SIGTERM or
// fusermount3 -u; the data-path modes (splice, writeback, direct_io reads)
// serving reads, writes and mmap. A real ckptfs-meta (port 0) serves the
// namespace, and one storage server the tests that move data.
//
// Needs root, /dev/fuse and fusermount3; skipped otherwise. TearDown kills
// (by pid) and unmounts whatever a test left behind.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace {

const std::string kBinDir = CKPTFS_BIN_DIR;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool IsMounted(const std::string& path) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mountpoint;
    fields >> id >> parent >> dev >> root >> mountpoint;
    if (mountpoint == path) return true;
  }
  return false;
}

// Starts `argv` with stdout+stderr appended to `log`; returns its pid.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// The exit status of child `pid`, or nullopt if it still runs after `timeout`.
std::optional<int> WaitExit(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 || absl::Now() > deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

bool WaitFor(absl::Duration timeout, const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// The pid of a process other than us whose command line contains `needle`.
// A TCP port of 127.0.0.1 that was free a moment ago (ckptfs-storage
// needs a real port: it advertises it).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// True once `pid` is gone (or a zombie nobody reaps: a daemonized mount is
// reparented to PID 1, which in a container may never reap it).
bool Exited(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

pid_t FindProcess(const std::string& needle) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  while (struct dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream cmdline(absl::StrCat("/proc/", pid, "/cmdline"));
    std::string text((std::istreambuf_iterator<char>(cmdline)), {});
    if (text.find(needle) != std::string::npos) {
      found = pid;
      break;
    }
  }
  closedir(proc);
  return found;
}

// Whether the running kernel is at least major.minor.
bool KernelAtLeast(int major, int minor) {
  struct utsname u;
  if (uname(&u) != 0) return false;
  int have_major = 0;
  int have_minor = 0;
  if (std::sscanf(u.release, "%d.%d", &have_major, &have_minor) != 2) return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

// Pages of the file behind `fd` in the page cache (cachestat(2), Linux
// 6.5); nullopt where the kernel lacks the call.
std::optional<uint64_t> CachedPages(int fd) {
  constexpr long kCachestat = 451;  // the same number on every architecture
  struct {
    uint64_t off, len;  // len 0: to the end of the file
  } range{0, 0};
  struct {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
  } stat{};
  if (syscall(kCachestat, fd, &range, &stat, 0) != 0) return std::nullopt;
  return stat.nr_cache;
}

class FuseMainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0 ||
        access("/usr/bin/fusermount3", X_OK) != 0) {
      GTEST_SKIP() << "needs root, /dev/fuse and fusermount3";
    }
    char tmpl[] = "/tmp/ckptfs-fuse-main-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    mnt_ = root_ + "/mnt";
    ASSERT_EQ(mkdir(mnt_.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((root_ + "/meta").c_str(), 0755), 0);
    meta_pid_ = Spawn({kBinDir + "/ckptfs-meta", "--listen=127.0.0.1:0",
                       "--data_dir=" + root_ + "/meta", "--replicas=1"},
                      root_ + "/meta.log");
    std::smatch m;
    const std::regex serving("serving on (127\\.0\\.0\\.1:[0-9]+)");
    ASSERT_TRUE(WaitFor(absl::Seconds(20), [&] {
      const std::string log = ReadAll(root_ + "/meta.log");
      if (!std::regex_search(log, m, serving)) return false;
      meta_ = m[1];
      return true;
    })) << ReadAll(root_ + "/meta.log");
  }

  void TearDown() override {
    if (root_.empty()) return;
    for (pid_t pid : {fuse_pid_, FindProcess("--mountpoint=" + mnt_)}) {
      if (pid > 0) kill(pid, SIGKILL);
    }
    if (fuse_pid_ > 0) WaitExit(fuse_pid_, absl::Seconds(5));
    if (IsMounted(mnt_)) umount2(mnt_.c_str(), MNT_DETACH);
    if (storage_pid_ > 0) {
      kill(storage_pid_, SIGKILL);
      WaitExit(storage_pid_, absl::Seconds(5));
    }
    if (meta_pid_ > 0) {
      kill(meta_pid_, SIGKILL);
      WaitExit(meta_pid_, absl::Seconds(5));
    }
    std::system(("rm -rf " + root_).c_str());
  }

  // Starts one storage server and waits until it has registered.
  void StartStorage() {
    ASSERT_EQ(mkdir((root_ + "/storage").c_str(), 0755), 0);
    const int port = FreePort();
    ASSERT_GT(port, 0);
    storage_pid_ =
        Spawn({kBinDir + "/ckptfs-storage", absl::StrCat("--listen=127.0.0.1:", port),
               "--data_dir=" + root_ + "/storage", "--meta=" + meta_, "--buffer_pool_mb=65"},
              root_ + "/storage.log");
    ASSERT_TRUE(WaitFor(absl::Seconds(20), [&] {
      return ReadAll(root_ + "/meta.log").find("registered") != std::string::npos;
    })) << ReadAll(root_ + "/storage.log");
  }

  std::vector<std::string> FuseArgv(const std::string& mountpoint, bool foreground) {
    std::vector<std::string> argv = {kBinDir + "/ckptfs-fuse", "--meta=" + meta_,
                                     "--mountpoint=" + mountpoint};
    if (foreground) argv.push_back("--foreground");
    return argv;
  }

  std::string root_, mnt_, meta_;
  pid_t meta_pid_ = -1;
  pid_t storage_pid_ = -1;  // only for tests that move data
  pid_t fuse_pid_ = -1;
};

TEST_F(FuseMainTest, MissingMountpointFailsClearly) {
  const std::string log = root_ + "/fuse.log";
  fuse_pid_ = Spawn(FuseArgv(root_ + "/nope", false), log);
  EXPECT_EQ(WaitExit(fuse_pid_, absl::Seconds(20)), 1);
  fuse_pid_ = -1;
  EXPECT_NE(ReadAll(log).find("does not exist"), std::string::npos) << ReadAll(log);
}

TEST_F(FuseMainTest, OutOfRangeDataPathFlagsFailClearlyBeforeMounting) {
  for (const std::string flag :
       {"--max_background=0", "--max_background=70000", "--write_buffer_mb=-1",
        "--idle_buffer_mb=-1", "--read_cache_mb=-1", "--readahead_chunks=-1",
        "--readahead_chunks=65", "--max_inflight_chunks=0"}) {
    SCOPED_TRACE(flag);
    const std::string log = root_ + "/fuse.log";
    std::vector<std::string> argv = FuseArgv(mnt_, false);
    argv.push_back(flag);
    fuse_pid_ = Spawn(argv, log);
    EXPECT_EQ(WaitExit(fuse_pid_, absl::Seconds(20)), 1);
    fuse_pid_ = -1;
    EXPECT_NE(ReadAll(log).find("--max_background in 1..65535"), std::string::npos) << ReadAll(log);
    EXPECT_FALSE(IsMounted(mnt_));
  }
}

TEST_F(FuseMainTest, SpliceAndWritebackModesServeWritesAndReads) {
  ASSERT_NO_FATAL_FAILURE(StartStorage());
  for (const std::string flag : {"--splice", "--writeback_cache", "--direct_io_writes=false"}) {
    SCOPED_TRACE(flag);
    std::vector<std::string> argv = FuseArgv(mnt_, false);
    argv.push_back(flag);
    ASSERT_EQ(WaitExit(Spawn(argv, root_ + "/fuse.log"), absl::Seconds(30)), 0)
        << ReadAll(root_ + "/fuse.log");
    ASSERT_TRUE(IsMounted(mnt_));
    const std::string path = mnt_ + "/f" + flag.substr(2, 6);
    std::string data(3 * 1048576 + 12345, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
    {
      std::FILE* f = std::fopen(path.c_str(), "wb");
      ASSERT_NE(f, nullptr);
      ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
      ASSERT_EQ(std::fclose(f), 0);
    }
    EXPECT_TRUE(ReadAll(path) == data) << "the file read back differs";
    ASSERT_EQ(std::system(("fusermount3 -u " + mnt_).c_str()), 0);
    ASSERT_TRUE(
        WaitFor(absl::Seconds(20), [&] { return FindProcess("--mountpoint=" + mnt_) <= 0; }));
  }
}

// With --direct_io_reads (the default) the first read-only open of a file
// bypasses the page cache where the kernel keeps direct_io files mmap-able
// (Linux 6.6+) and stays cached elsewhere, and the next open shares the
// page cache; either way, and with --direct_io_reads=false, a file opened
// read-only reads back and maps with MAP_SHARED (safetensors,
// numpy.memmap) and MAP_PRIVATE (torch.load(mmap=True)).
TEST_F(FuseMainTest, DirectIoReadsKeepReadOnlyFilesMmapable) {
  ASSERT_NO_FATAL_FAILURE(StartStorage());
  const bool kernel_allows_mmap = KernelAtLeast(6, 6);
  std::string data(3 * 1048576 + 12345, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  for (const bool direct : {false, true}) {
    SCOPED_TRACE(direct ? "default (--direct_io_reads)" : "--direct_io_reads=false");
    const std::string log = root_ + (direct ? "/fuse-direct.log" : "/fuse-cached.log");
    std::vector<std::string> argv = FuseArgv(mnt_, false);
    if (!direct) argv.push_back("--direct_io_reads=false");
    ASSERT_EQ(WaitExit(Spawn(argv, log), absl::Seconds(30)), 0) << ReadAll(log);
    ASSERT_TRUE(IsMounted(mnt_));
    const std::string path = mnt_ + (direct ? "/direct" : "/cached");
    {
      std::FILE* f = std::fopen(path.c_str(), "wb");
      ASSERT_NE(f, nullptr);
      ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
      ASSERT_EQ(std::fclose(f), 0);
    }
    const int fd = open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    std::string back(data.size(), '\0');
    size_t done = 0;
    while (done < back.size()) {
      const ssize_t n = pread(fd, back.data() + done, back.size() - done, done);
      ASSERT_GT(n, 0) << strerror(errno);
      done += static_cast<size_t>(n);
    }
    EXPECT_TRUE(back == data) << "read(2) returned other bytes";
    // What the mount chose; on 6.6+ it must be direct reads (a kernel with
    // the flag backported may choose it too).
    const bool direct_active =
        direct && ReadAll(log).find("read-only opens bypass the page cache") != std::string::npos;
    if (direct && kernel_allows_mmap) {
      EXPECT_TRUE(direct_active) << ReadAll(log);
    }
    if (std::optional<uint64_t> cached = CachedPages(fd)) {
      if (direct_active) {
        EXPECT_EQ(*cached, 0u) << "a direct_io read filled the page cache";
      } else {
        EXPECT_GT(*cached, 0u) << "a cached read left no pages";
      }
    }
    for (const int kind : {MAP_SHARED, MAP_PRIVATE}) {
      SCOPED_TRACE(kind == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
      void* map = mmap(nullptr, data.size(), PROT_READ, kind, fd, 0);
      ASSERT_NE(map, MAP_FAILED) << strerror(errno);
      EXPECT_EQ(std::memcmp(map, data.data(), data.size()), 0);
      munmap(map, data.size());
    }
    close(fd);
    if (direct_active) {
      // The second reader of the file shares the page cache.
      const int again = open(path.c_str(), O_RDONLY);
      ASSERT_GE(again, 0);
      std::string second(data.size(), '\0');
      for (size_t at = 0; at < second.size();) {
        const ssize_t n = pread(again, second.data() + at, second.size() - at, at);
        ASSERT_GT(n, 0) << strerror(errno);
        at += static_cast<size_t>(n);
      }
      EXPECT_TRUE(second == data) << "the second reader got other bytes";
      if (std::optional<uint64_t> cached = CachedPages(again)) {
        EXPECT_GT(*cached, 0u) << "the second reader's read left no pages";
      }
      close(again);
    }
    if (direct && !direct_active) {
      EXPECT_NE(ReadAll(log).find("read-only opens use the page cache"), std::string::npos)
          << ReadAll(log);
    }
    ASSERT_EQ(std::system(("fusermount3 -u " + mnt_).c_str()), 0);
    ASSERT_TRUE(
        WaitFor(absl::Seconds(20), [&] { return FindProcess("--mountpoint=" + mnt_) <= 0; }));
  }
}

TEST_F(FuseMainTest, UnreachableMetadataServiceFailsClearly) {
  const std::string log = root_ + "/fuse.log";
  fuse_pid_ = Spawn({kBinDir + "/ckptfs-fuse", "--meta=127.0.0.1:1", "--mountpoint=" + mnt_}, log);
  // The Client gives up on an unreachable service after at most 10 s.
  EXPECT_EQ(WaitExit(fuse_pid_, absl::Seconds(60)), 1);
  fuse_pid_ = -1;
  EXPECT_NE(ReadAll(log).find("127.0.0.1:1"), std::string::npos) << ReadAll(log);
  EXPECT_FALSE(IsMounted(mnt_));
}

TEST_F(FuseMainTest, DaemonReturnsWithTheMountLiveAndExitsOnUnmount) {
  const std::string log = root_ + "/fuse.log";
  fuse_pid_ = Spawn(FuseArgv(mnt_, false), log);
  ASSERT_EQ(WaitExit(fuse_pid_, absl::Seconds(30)), 0) << ReadAll(log);
  fuse_pid_ = -1;
  // The parent returned 0: the mount works now, without waiting.
  ASSERT_TRUE(IsMounted(mnt_));
  ASSERT_EQ(mkdir((mnt_ + "/d").c_str(), 0755), 0);
  struct stat st;
  ASSERT_EQ(stat((mnt_ + "/d").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  // The daemon logs to the regular file it was given.
  EXPECT_NE(ReadAll(log).find("max_write=1048576"), std::string::npos) << ReadAll(log);

  // A second mount on the same directory is refused.
  const std::string log2 = root_ + "/fuse2.log";
  pid_t second = Spawn(FuseArgv(mnt_, true), log2);
  EXPECT_EQ(WaitExit(second, absl::Seconds(20)), 1);
  EXPECT_NE(ReadAll(log2).find("already mounted"), std::string::npos) << ReadAll(log2);

  const pid_t daemon = FindProcess("--mountpoint=" + mnt_);
  ASSERT_GT(daemon, 0);
  ASSERT_EQ(std::system(("fusermount3 -u " + mnt_).c_str()), 0);
  EXPECT_TRUE(WaitFor(absl::Seconds(10), [&] { return Exited(daemon); }));
  EXPECT_FALSE(IsMounted(mnt_));
}

TEST_F(FuseMainTest, SigtermUnmountsAndExitsZero) {
  const std::string log = root_ + "/fuse.log";
  fuse_pid_ = Spawn(FuseArgv(mnt_, true), log);
  ASSERT_TRUE(WaitFor(absl::Seconds(30), [&] { return IsMounted(mnt_); })) << ReadAll(log);
  struct stat st;
  ASSERT_EQ(stat(mnt_.c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, 1u);
  ASSERT_EQ(kill(fuse_pid_, SIGTERM), 0);
  EXPECT_EQ(WaitExit(fuse_pid_, absl::Seconds(20)), 0) << ReadAll(log);
  fuse_pid_ = -1;
  EXPECT_FALSE(IsMounted(mnt_));
}

}  // namespace
