// The `ckptfs` command line end to end: `up` starts a local cluster and
// mounts it, `down` stops everything, `up` again finds the data, a busy port
// is refused with a message naming it, and `down` twice is harmless.
// Clusters get no metrics endpoints (--metrics-port 0), so a test never
// takes the default ports of the README demo; TearDown fails the test if
// `down` leaves anything running, kills what it left and detaches the mount
// a killed FUSE daemon leaves.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

// A base port with `count` consecutive free ports after it.
uint16_t FreePortRange(int count) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint16_t base = static_cast<uint16_t>(20000 + (::getpid() * 7 + attempt * 97) % 30000);
    bool all_free = true;
    for (int i = 0; i < count && all_free; ++i) {
      all_free = ListenTcp(HostPort{"127.0.0.1", static_cast<uint16_t>(base + i)}).ok();
    }
    if (all_free) return base;
  }
  return 0;
}

// Live processes whose command line mentions `needle` (every daemon `ckptfs
// up` starts is given paths under its state directory), with their command
// lines.
std::vector<std::pair<pid_t, std::string>> ProcessesMentioning(const std::string& needle) {
  std::vector<std::pair<pid_t, std::string>> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (struct dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
    std::string cmdline((std::istreambuf_iterator<char>(in)), {});  // empty for a zombie
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (absl::StrContains(cmdline, needle)) found.emplace_back(static_cast<pid_t>(pid), cmdline);
  }
  ::closedir(proc);
  return found;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDir("ckptfs-cli-");
    ASSERT_TRUE(dir.ok());
    root_ = *dir;
    state_ = root_ + "/state";
    mnt_ = root_ + "/checkpoints";
    base_ = FreePortRange(6);
    ASSERT_NE(base_, 0);
  }
  // Runs even when a test fails midway: `down` stops whatever was recorded;
  // anything it leaves behind fails the test and is killed here.
  void TearDown() override {
    if (root_.empty()) return;  // SetUp made nothing (and "/" would match everything)
    std::string out;
    const int down = RunShell(absl::StrCat(Ckptfs(), " down --state-dir ", state_), &out);
    if (IsCkptfsMount(mnt_)) RunShell("fusermount3 -u -z " + mnt_, nullptr);
    std::vector<std::pair<pid_t, std::string>> left = ProcessesMentioning(root_ + "/");
    std::vector<std::string> named;
    for (const auto& [pid, cmdline] : left) {
      named.push_back(absl::StrCat(pid, ": ", cmdline));
      ::kill(pid, SIGKILL);
    }
    for (int i = 0; i < 250 && !ProcessesMentioning(root_ + "/").empty(); ++i) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    // Again: a FUSE daemon killed above leaves its mount behind, dead
    // (ENOTCONN), and RemoveTree would fail on it.
    if (IsCkptfsMount(mnt_)) RunShell("fusermount3 -u -z " + mnt_, nullptr);
    EXPECT_EQ(down, 0) << out;
    EXPECT_TRUE(left.empty()) << "`ckptfs down` left running (now killed):\n"
                              << absl::StrJoin(named, "\n") << "\n"
                              << out;
    RemoveTree(root_);
  }
  std::string Ckptfs() const { return BinDir() + "/ckptfs"; }
  std::string Up() const {
    return absl::StrCat(Ckptfs(), " up --state-dir ", state_, " --mountpoint ", mnt_,
                        " --meta-port ", base_, " --storage-port ", base_ + 1,
                        " --servers 4 --metrics-port 0");
  }

  std::string root_, state_, mnt_;
  uint16_t base_ = 0;
};

TEST_F(CliTest, UpDownUpFindsTheDataAgain) {
  std::string out;
  ASSERT_EQ(RunShell(Up(), &out), 0) << out;
  EXPECT_NE(out.find(absl::StrCat("127.0.0.1:", base_)), std::string::npos) << out;
  ASSERT_TRUE(IsCkptfsMount(mnt_)) << out;
  const std::string data = TestData((5 << 20) + 1, 3);
  ASSERT_EQ(::mkdir((mnt_ + "/run1").c_str(), 0755), 0);
  ASSERT_TRUE(WriteWholeFile(mnt_ + "/run1/rank_0.pt", data).ok());

  // A second `up` on the same state dir refuses: the cluster is running.
  out.clear();
  EXPECT_NE(RunShell(Up(), &out), 0) << out;

  out.clear();
  ASSERT_EQ(RunShell(absl::StrCat(Ckptfs(), " down --state-dir ", state_), &out), 0) << out;
  EXPECT_FALSE(IsCkptfsMount(mnt_));
  out.clear();
  EXPECT_EQ(RunShell(absl::StrCat(Ckptfs(), " down --state-dir ", state_), &out), 0) << out;

  out.clear();
  ASSERT_EQ(RunShell(Up(), &out), 0) << out;
  auto back = ReadWholeFile(mnt_ + "/run1/rank_0.pt");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
}

TEST_F(CliTest, BusyPortIsRefusedClearly) {
  auto blocker = ListenTcp(HostPort{"127.0.0.1", base_});
  ASSERT_TRUE(blocker.ok());
  std::string out;
  EXPECT_NE(RunShell(Up(), &out), 0) << out;
  EXPECT_NE(out.find(absl::StrCat(base_)), std::string::npos)
      << "message should name the port: " << out;
  EXPECT_FALSE(IsCkptfsMount(mnt_));
}

}  // namespace
}  // namespace ckptfs::testing
