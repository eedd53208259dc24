// `ckptfs` against the real daemons of this build: up with a chunk size,
// status, a second mount of the same cluster (`mount`/`umount`) that sees a
// file written through the first, then down leaves no process and no mount.
// Skipped when the daemons are not built or /dev/fuse is not usable. (The
// up/down/up data check lives in tests/integration/cli_test.cc.)
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/cluster_test_support.h"
#include "tools/mounts.h"
#include "tools/ports.h"
#include "tools/process.h"
#include "tools/state_dir.h"

namespace ckptfs::tools {
namespace {

using testing::ClusterUsable;
using testing::PortSearchStart;
using testing::ProcessAlive;
using testing::ProcessGoneWithin;
using testing::ReadWholeFile;

class RealClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ClusterUsable()) GTEST_SKIP() << "daemons not built or /dev/fuse not usable";
    char pattern[] = "/tmp/ckptfs-real-test-XXXXXX";
    root_ = ::mkdtemp(pattern);
    state_ = root_ + "/state";
    mnt_ = root_ + "/mnt";
    node2_ = root_ + "/node2";
    ::setenv("CKPTFS_BIN_DIR", CKPTFS_BUILD_BIN_DIR, 1);
    const auto base = FindFreePortRange("127.0.0.1", PortSearchStart(13), 3, {});
    ASSERT_TRUE(base.has_value());
    base_ = *base;
  }
  void TearDown() override {
    if (root_.empty()) return;
    Run({"down", "--state-dir", state_, "--grace-s", "2"});
    for (const std::string& m : {mnt_, node2_}) {
      if (std::optional<MountEntry> e = FindMount(m); e && e->is_fuse()) {
        (void)FuseUnmount(m, /*lazy=*/true);
      }
    }
    if (node2_pid_ > 0 && ProcessAlive(node2_pid_)) ::kill(node2_pid_, SIGKILL);
    ::unsetenv("CKPTFS_BIN_DIR");
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), CKPTFS_CLI_PATH);
    auto result = RunCommand(args);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : CommandResult{-1, ""};
  }

  std::string root_, state_, mnt_, node2_;
  uint16_t base_ = 0;
  pid_t node2_pid_ = 0;
};

TEST_F(RealClusterTest, UpStatusSecondMountDown) {
  const std::string meta = absl::StrCat("127.0.0.1:", base_);
  CommandResult r =
      Run({"up", "--state-dir", state_, "--mountpoint", mnt_, "--meta-port", absl::StrCat(base_),
           "--storage-port", absl::StrCat(base_ + 1), "--servers", "2", "--chunk-size", "65536"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("storage-1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ckptfs down --state-dir " + state_), std::string::npos);
  ASSERT_TRUE(FindMount(mnt_).has_value());

  auto state = StateDir::Open(state_, /*create=*/false)->Load();
  ASSERT_TRUE(state.ok() && state->has_value());
  ASSERT_EQ((*state)->daemons.size(), 5u);  // meta, 2 storage, fuse, repair
  EXPECT_EQ((*state)->daemons[4].role, "repair");
  EXPECT_NE(ReadWholeFile(absl::StrCat("/proc/", (*state)->daemons[0].process.pid, "/cmdline"))
                .find("--default_chunk_size=65536"),
            std::string::npos);

  r = Run({"status", "--state-dir", state_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("2 storage servers, 2 up"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("127.0.0.1:", base_ + 2)), std::string::npos);

  // 5 chunks + a bit, so both storage servers hold some of it.
  std::string data(5 * 65536 + 123, '\0');
  std::mt19937 rng(7);
  for (char& c : data) c = static_cast<char>(rng());
  {
    std::ofstream out(mnt_ + "/shard.bin", std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    ASSERT_TRUE(out.good());
  }

  // Another node needs the cluster's credential (`up` made it).
  const std::string credential = state_ + "/credential";
  r = Run({"mount", "--meta", meta, "--mountpoint", node2_, "--credential-file", credential});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const size_t at = r.output.find("ckptfs-fuse pid ");
  ASSERT_NE(at, std::string::npos) << r.output;
  std::string pid_text = r.output.substr(at + 16);
  pid_text = pid_text.substr(0, pid_text.find(','));
  ASSERT_TRUE(absl::SimpleAtoi(pid_text, &node2_pid_)) << r.output;
  EXPECT_TRUE(ReadWholeFile(node2_ + "/shard.bin") == data);
  // Mounting over a live mount is refused.
  EXPECT_EQ(Run({"mount", "--meta", meta, "--mountpoint", node2_}).exit_status, 1);

  r = Run({"umount", "--mountpoint", node2_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_FALSE(FindMount(node2_).has_value());
  r = Run({"umount", "--mountpoint", node2_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("nothing is mounted"), std::string::npos);

  r = Run({"down", "--state-dir", state_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_FALSE(FindMount(mnt_).has_value());
  for (const DaemonRecord& d : (*state)->daemons) {
    EXPECT_TRUE(ProcessGoneWithin(d.process.pid)) << d.role;
  }
  for (int i = 0; i < 50 && ProcessAlive(node2_pid_); ++i) ::usleep(100 * 1000);
  EXPECT_TRUE(ProcessGoneWithin(node2_pid_)) << "ckptfs-fuse of the second mount exits on umount";
  EXPECT_FALSE(std::filesystem::exists(state_ + "/cluster.state"));
}

}  // namespace
}  // namespace ckptfs::tools
