// CPU accounting: /proc/PID/stat parsing (a comm with spaces and
// parentheses), finding processes by name and pid, and the meter.
#include "bench/cpu.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

TEST(CpuTest, ParsesUtimePlusStime) {
  // Fields 14 and 15 are utime and stime.
  const std::string stat =
      "1234 (a (weird) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0";
  auto ticks = ParseStatCpuTicks(stat);
  ASSERT_TRUE(ticks.ok()) << ticks.status();
  EXPECT_EQ(*ticks, 325u);
  EXPECT_FALSE(ParseStatCpuTicks("1234 no parens").ok());
  EXPECT_FALSE(ParseStatCpuTicks("1234 (x) S 1 2").ok());
}

TEST(CpuTest, ReadsOwnProcess) {
  auto seconds = ProcessCpuSeconds(::getpid());
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_GE(*seconds, 0);
  EXPECT_EQ(ProcessCpuSeconds(-5).status().code(), absl::StatusCode::kNotFound);
}

TEST(CpuTest, ChildrenKernelTimeIsToldApartFromUserTime) {
  const CpuTime before = ChildrenCpu();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // All kernel time: 2 GiB of zeros copied by read(2), no user work.
    std::vector<char> buf(1 << 20);
    const int fd = open("/dev/zero", O_RDONLY);
    for (int i = 0; i < 2048 && fd >= 0; ++i) {
      if (read(fd, buf.data(), buf.size()) <= 0) _exit(1);
    }
    _exit(fd >= 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const CpuTime used = ChildrenCpu() - before;
  EXPECT_GT(used.system_s, 0.02);
  EXPECT_GT(used.system_s, used.user_s);
  EXPECT_DOUBLE_EQ(used.total_s(), used.user_s + used.system_s);
}

TEST(CpuTest, ResolvesByNameAndPid) {
  std::ifstream in("/proc/self/comm");
  std::string comm;
  std::getline(in, comm);
  const pid_t self = ::getpid();
  std::vector<pid_t> by_name = ResolveProcesses({comm});
  EXPECT_NE(std::find(by_name.begin(), by_name.end(), self), by_name.end()) << comm;
  EXPECT_EQ(ResolveProcesses({absl::StrCat(self), absl::StrCat(self)}), std::vector<pid_t>{self});
  EXPECT_TRUE(ResolveProcesses({"no-such-process-name-xyz"}).empty());
}

TEST(CpuTest, FlagValuesAndPorts) {
  const std::vector<std::string> argv = {"ckptfs-fuse", "--meta=127.0.0.1:7650", "--mountpoint",
                                         "/mnt/x", "--foreground"};
  EXPECT_EQ(FlagValue(argv, "meta"), "127.0.0.1:7650");
  EXPECT_EQ(FlagValue(argv, "mountpoint"), "/mnt/x");
  EXPECT_FALSE(FlagValue(argv, "listen").has_value());
  EXPECT_FALSE(FlagValue(argv, "mount").has_value());
  EXPECT_EQ(AddressPort("127.0.0.1:7650"), 7650);
  EXPECT_EQ(AddressPort("[::1]:80"), 80);
  EXPECT_FALSE(AddressPort("localhost").has_value());
  // No cluster is served from a made-up mountpoint or port.
  EXPECT_TRUE(FindCkptfsClusterProcesses("/no/such/mount", "").empty());
}

TEST(CpuTest, MeterWithoutProcessesHasNoValue) {
  TargetCpuMeter none({"no-such-process-name-xyz"});
  none.Start();
  EXPECT_FALSE(none.Stop().has_value());
  TargetCpuMeter self({absl::StrCat(::getpid())});
  self.Start();
  EXPECT_EQ(self.pids(), std::vector<pid_t>{::getpid()});
  std::optional<double> spent = self.Stop();
  ASSERT_TRUE(spent.has_value());
  EXPECT_GE(*spent, 0);
}

}  // namespace
}  // namespace ckptfs::bench
