// The ckptfs-storage executable as a process: serves and exits 0 on SIGTERM,
// keeps written chunks across kill -9, refuses a busy port and a data
// directory already in use (exit 2, clear message), and logs its server id
// once registered. Every process started is killed in teardown.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/crc32c.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "tests/storage/fake_meta.h"
#include "tests/storage/temp_dir.h"

#ifndef CKPTFS_STORAGE_BIN
#error "CKPTFS_STORAGE_BIN must name the ckptfs-storage executable"
#endif

namespace ckptfs::storage {
namespace {

class StorageProcessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (pid_t pid : pids_) {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  }

  // Starts ckptfs-storage with `args`; stderr and stdout go to `log`.
  pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
    // Everything the child needs is built before fork(): between fork and
    // exec a multi-threaded process may only make async-signal-safe calls.
    std::string bin = CKPTFS_STORAGE_BIN;
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    argv.push_back(bin.data());
    for (std::string& arg : copy) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
      }
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    pids_.push_back(pid);
    return pid;
  }

  // The exit status of `pid`, or -1 if it is still running after `timeout`.
  int WaitExit(pid_t pid, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        for (pid_t& p : pids_) {
          if (p == pid) p = -1;
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (absl::Now() > deadline) return -1;
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // A connection to a server that is starting, once it accepts.
  static std::unique_ptr<DataConnection> ConnectWhenUp(uint16_t port) {
    std::unique_ptr<DataConnection> connection;
    WaitFor(
        [&] {
          auto c = DataConnection::Connect({"127.0.0.1", port}, absl::Seconds(5));
          if (c.ok()) connection = *std::move(c);
          return connection != nullptr;
        },
        absl::Seconds(20));
    return connection;
  }

  // ConnectWhenUp, once the server's own log says it serves on `port`: a
  // port freed by a killed server may be taken meanwhile by another test's
  // process, which a bare connect would reach instead.
  static std::unique_ptr<DataConnection> ConnectWhenServing(uint16_t port, const std::string& log) {
    const std::string line = absl::StrCat("serving on 127.0.0.1:", port);
    if (!WaitFor([&] { return ReadFile(log).find(line) != std::string::npos; },
                 absl::Seconds(20))) {
      return nullptr;
    }
    return ConnectWhenUp(port);
  }

  static absl::Status WriteChunk(DataConnection& c, uint64_t ino, const std::string& data) {
    data::RequestHeader request;
    request.set_op(data::WRITE);
    request.set_ino(ino);
    request.set_replace(true);
    request.set_payload_crc32c(Crc32c(data.data(), data.size()));
    return c.Call(request, data.data(), data.size(), nullptr, 0).status();
  }

  static absl::StatusOr<std::string> ReadChunk(DataConnection& c, uint64_t ino) {
    data::RequestHeader request;
    request.set_op(data::READ);
    request.set_ino(ino);
    request.set_length(4 << 20);
    std::string out(4 << 20, '\0');
    auto response = c.Call(request, nullptr, 0, out.data(), out.size());
    if (!response.ok()) return response.status();
    out.resize(response->payload_len);
    return out;
  }

  std::vector<std::string> Args(uint16_t port, const std::string& data_dir) {
    return {absl::StrCat("--listen=127.0.0.1:", port), "--data_dir=" + data_dir};
  }

  TempDir dir_;
  std::vector<pid_t> pids_;
};

TEST_F(StorageProcessTest, ServesAndExitsZeroOnSigterm) {
  const uint16_t port = UnusedPort();
  const std::string data = dir_.path() + "/data/nested";  // created if missing
  const pid_t pid = Spawn(Args(port, data), dir_.path() + "/log");
  auto c = ConnectWhenServing(port, dir_.path() + "/log");
  ASSERT_NE(c, nullptr) << ReadFile(dir_.path() + "/log");
  ASSERT_TRUE(WriteChunk(*c, 1, "chunk").ok());
  auto back = ReadChunk(*c, 1);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "chunk");
  struct stat st {};
  EXPECT_EQ(::stat((data + "/server.uuid").c_str(), &st), 0);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid, absl::Seconds(10)), 0) << ReadFile(dir_.path() + "/log");
}

// Started with a low soft open-file limit (inherited), the server raises it
// to the hard limit so that hundreds of connections do not hit EMFILE.
TEST_F(StorageProcessTest, RaisesItsOpenFileLimit) {
  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old_limit), 0);
  if (old_limit.rlim_max <= 256) GTEST_SKIP() << "hard open-file limit too low to test";
  rlimit low = old_limit;
  low.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  const uint16_t port = UnusedPort();
  const pid_t pid = Spawn(Args(port, dir_.path() + "/data"), dir_.path() + "/log");
  ::setrlimit(RLIMIT_NOFILE, &old_limit);
  auto c = ConnectWhenServing(port, dir_.path() + "/log");
  ASSERT_NE(c, nullptr) << ReadFile(dir_.path() + "/log");
  rlimit child{};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, nullptr, &child), 0);
  EXPECT_EQ(child.rlim_cur, old_limit.rlim_max);
}

TEST_F(StorageProcessTest, KillNineKeepsWrittenChunksAndIdentity) {
  const uint16_t port = UnusedPort();
  const std::string data = dir_.path() + "/data";
  pid_t pid = Spawn(Args(port, data), dir_.path() + "/log1");
  auto c = ConnectWhenServing(port, dir_.path() + "/log1");
  ASSERT_NE(c, nullptr) << ReadFile(dir_.path() + "/log1");
  const std::string chunk(300000, 'k');
  ASSERT_TRUE(WriteChunk(*c, 9, chunk).ok());
  const std::string uuid = ReadFile(data + "/server.uuid");
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  EXPECT_EQ(WaitExit(pid, absl::Seconds(10)), 128 + SIGKILL);
  c.reset();
  // Back on another port (the data directory is what it must find again).
  const uint16_t port2 = UnusedPort();
  pid = Spawn(Args(port2, data), dir_.path() + "/log2");
  c = ConnectWhenServing(port2, dir_.path() + "/log2");
  ASSERT_NE(c, nullptr) << ReadFile(dir_.path() + "/log2");
  auto back = ReadChunk(*c, 9);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == chunk);
  EXPECT_EQ(ReadFile(data + "/server.uuid"), uuid);
}

TEST_F(StorageProcessTest, KillNineMidWriteNeverLeavesATornChunk) {
  // A client rewrites one chunk with alternating contents while the server
  // is killed at an arbitrary moment: after restart the chunk is one whole
  // version, never torn, never EIO, and no unfinished write is left over.
  const std::string a(2 << 20, 'a');
  const std::string b((2 << 20) - 4097, 'b');
  const std::string data = dir_.path() + "/data";
  int interrupted = 0;  // rounds where the kill caught a write in flight
  for (int round = 0; round < 3; ++round) {
    // A fresh port for every start (a port a killed server freed may be
    // taken by another test's process; the data directory is what counts).
    const uint16_t port = UnusedPort();
    const pid_t pid = Spawn(Args(port, data), absl::StrCat(dir_.path(), "/log", round));
    auto c = ConnectWhenServing(port, absl::StrCat(dir_.path(), "/log", round));
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(WriteChunk(*c, 5, a).ok());
    std::atomic<bool> stop{false};
    std::thread writer([&] {
      for (int i = 0; !stop; ++i) {
        if (!WriteChunk(*c, 5, i % 2 ? a : b).ok()) break;  // the server died
      }
    });
    absl::SleepFor(absl::Milliseconds(50 + 70 * round));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    EXPECT_EQ(WaitExit(pid, absl::Seconds(10)), 128 + SIGKILL);
    stop = true;
    writer.join();
    c.reset();
    const uint16_t port_again = UnusedPort();
    const pid_t again =
        Spawn(Args(port_again, data), absl::StrCat(dir_.path(), "/log", round, "b"));
    c = ConnectWhenServing(port_again, absl::StrCat(dir_.path(), "/log", round, "b"));
    ASSERT_NE(c, nullptr);
    auto back = ReadChunk(*c, 5);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == a || *back == b) << "round " << round << ": " << back->size();
    EXPECT_TRUE(std::filesystem::is_empty(data + "/tmp"));
    ASSERT_EQ(::kill(again, SIGTERM), 0);
    EXPECT_EQ(WaitExit(again, absl::Seconds(10)), 0);
    const std::string log = ReadFile(absl::StrCat(dir_.path(), "/log", round, "b"));
    if (log.find("unfinished chunk writes") != std::string::npos) ++interrupted;
  }
  RecordProperty("rounds_with_unfinished_writes", interrupted);
}

TEST_F(StorageProcessTest, BusyPortExitsTwoNamingTheAddress) {
  auto taken = ListenTcp({"127.0.0.1", 0});
  ASSERT_TRUE(taken.ok());
  const uint16_t port = *LocalPort(taken->get());
  const pid_t pid = Spawn(Args(port, dir_.path() + "/data"), dir_.path() + "/log");
  EXPECT_EQ(WaitExit(pid, absl::Seconds(20)), 2);
  const std::string log = ReadFile(dir_.path() + "/log");
  EXPECT_NE(log.find(absl::StrCat("127.0.0.1:", port)), std::string::npos) << log;
  EXPECT_NE(log.find("in use"), std::string::npos) << log;
}

TEST_F(StorageProcessTest, DataPathFlagsOutOfRangeExitTwo) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--buffer_pool_mb=10", "at least 65"},
      {"--net_threads=0", "--net_threads"},
      {"--disk_threads=0", "--disk_threads"}};
  for (const auto& [flag, says] : bad) {
    std::vector<std::string> args = Args(UnusedPort(), dir_.path() + "/data");
    args.push_back(flag);
    const pid_t pid = Spawn(args, dir_.path() + "/log");
    EXPECT_EQ(WaitExit(pid, absl::Seconds(20)), 2) << flag;
    const std::string log = ReadFile(dir_.path() + "/log");
    EXPECT_NE(log.find(says), std::string::npos) << flag << ": " << log;
  }
}

// The data-path flags reach the server: one network loop and one disk
// thread, a zero-copy sender and the smallest pool still serve.
TEST_F(StorageProcessTest, ServesWithTheSmallestDataPathSettings) {
  const uint16_t port = UnusedPort();
  std::vector<std::string> args = Args(port, dir_.path() + "/data");
  for (const char* flag :
       {"--buffer_pool_mb=65", "--net_threads=1", "--disk_threads=1", "--zero_copy_send"}) {
    args.push_back(flag);
  }
  const pid_t pid = Spawn(args, dir_.path() + "/log");
  auto c = ConnectWhenServing(port, dir_.path() + "/log");
  ASSERT_NE(c, nullptr) << ReadFile(dir_.path() + "/log");
  const std::string data(3 << 20, 'z');
  ASSERT_TRUE(WriteChunk(*c, 2, data).ok());
  auto back = ReadChunk(*c, 2);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid, absl::Seconds(10)), 0) << ReadFile(dir_.path() + "/log");
}

TEST_F(StorageProcessTest, SecondServerOnTheSameDataDirIsRefused) {
  const std::string data = dir_.path() + "/data";
  const uint16_t port1 = UnusedPort();
  const pid_t first = Spawn(Args(port1, data), dir_.path() + "/log1");
  ASSERT_NE(ConnectWhenServing(port1, dir_.path() + "/log1"), nullptr);
  const pid_t second = Spawn(Args(UnusedPort(), data), dir_.path() + "/log2");
  EXPECT_EQ(WaitExit(second, absl::Seconds(20)), 2);
  const std::string log = ReadFile(dir_.path() + "/log2");
  EXPECT_NE(log.find("in use by another ckptfs-storage"), std::string::npos) << log;
  EXPECT_NE(log.find(data), std::string::npos) << log;
  ASSERT_EQ(::kill(first, SIGTERM), 0);
  EXPECT_EQ(WaitExit(first, absl::Seconds(10)), 0);
}

TEST_F(StorageProcessTest, LogsItsServerIdOnceRegistered) {
  auto meta = FakeMeta::Start(0, /*server_id=*/5);
  ASSERT_NE(meta, nullptr);
  const uint16_t port = UnusedPort();
  std::vector<std::string> args = Args(port, dir_.path() + "/data");
  args.push_back("--meta=" + meta->address());
  args.push_back("--heartbeat_interval_s=1");
  const std::string log = dir_.path() + "/log";
  const pid_t pid = Spawn(args, log);
  const std::string want =
      absl::StrCat("ckptfs-storage: serving on 127.0.0.1:", port, " as server 5");
  EXPECT_TRUE(
      WaitFor([&] { return ReadFile(log).find(want) != std::string::npos; }, absl::Seconds(20)))
      << ReadFile(log);
  EXPECT_TRUE(WaitFor([&] { return meta->heartbeats() >= 1; }, absl::Seconds(10)));
  EXPECT_EQ(meta->last_register().address(), absl::StrCat("127.0.0.1:", port));
  EXPECT_EQ(meta->last_register().uuid() + "\n", ReadFile(dir_.path() + "/data/server.uuid"));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  EXPECT_EQ(WaitExit(pid, absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace ckptfs::storage
