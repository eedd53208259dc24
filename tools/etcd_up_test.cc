// `ckptfs up --meta-backend etcd` against the real daemons of this build and
// Debian's etcd: up starts 3 etcd members, two metadata servers serving at
// once (--etcd_shared), storage servers given both and the mount; status answers through
// the pair; down stops every recorded process; up again on the same state
// directory finds the file written before. Skipped when the daemons are not
// built, /dev/fuse is not usable or etcd is not installed.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/cluster_test_support.h"
#include "tools/local_etcd.h"
#include "tools/mounts.h"
#include "tools/ports.h"
#include "tools/process.h"
#include "tools/state_dir.h"

namespace ckptfs::tools {
namespace {

using testing::ClusterUsable;
using testing::PortSearchStart;
using testing::ProcessGoneWithin;
using testing::ReadWholeFile;

class EtcdUpTest : public ::testing::Test {
 protected:
  // meta, 2 storage, standby, 6 etcd ports.
  static constexpr int kPorts = 4 + 2 * kEtcdMembers;

  void SetUp() override {
    if (!ClusterUsable()) GTEST_SKIP() << "daemons not built or /dev/fuse not usable";
    if (!FindEtcdBinary().ok()) GTEST_SKIP() << "etcd-server is not installed";
    char pattern[] = "/tmp/ckptfs-etcd-up-test-XXXXXX";
    root_ = ::mkdtemp(pattern);
    state_ = root_ + "/state";
    mnt_ = root_ + "/mnt";
    ::setenv("CKPTFS_BIN_DIR", CKPTFS_BUILD_BIN_DIR, 1);
    const auto base = FindFreePortRange("127.0.0.1", PortSearchStart(17), kPorts, {});
    ASSERT_TRUE(base.has_value());
    base_ = *base;
  }
  void TearDown() override {
    if (root_.empty()) return;
    Run({"down", "--state-dir", state_, "--grace-s", "2"});
    if (std::optional<MountEntry> e = FindMount(mnt_); e && e->is_fuse()) {
      (void)FuseUnmount(mnt_, /*lazy=*/true);
    }
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
  // `backend`: "" leaves --meta-backend out.
  CommandResult Up(const std::string& backend = "etcd") {
    std::vector<std::string> args = {"up",
                                     "--state-dir",
                                     state_,
                                     "--mountpoint",
                                     mnt_,
                                     "--meta-port",
                                     absl::StrCat(base_),
                                     "--storage-port",
                                     absl::StrCat(base_ + 1),
                                     "--servers",
                                     "2",
                                     "--standby-port",
                                     absl::StrCat(base_ + 3),
                                     "--etcd-port",
                                     absl::StrCat(base_ + 4),
                                     "--metrics-port",
                                     "0",
                                     "--timeout-s",
                                     "60"};
    if (!backend.empty()) {
      args.push_back("--meta-backend");
      args.push_back(backend);
    }
    return Run(args);
  }
  std::optional<ClusterState> State() {
    auto state = StateDir::Open(state_, /*create=*/false)->Load();
    if (!state.ok()) return std::nullopt;
    return *state;
  }
  void DownAndExpectAllStopped(const ClusterState& state) {
    CommandResult r = Run({"down", "--state-dir", state_});
    EXPECT_EQ(r.exit_status, 0) << r.output;
    EXPECT_FALSE(FindMount(mnt_).has_value());
    for (const DaemonRecord& d : state.daemons) {
      EXPECT_TRUE(ProcessGoneWithin(d.process.pid)) << d.role << "\n" << r.output;
    }
  }

  std::string root_, state_, mnt_;
  uint16_t base_ = 0;
};

TEST_F(EtcdUpTest, UpStatusDownUpFindsTheDataAgain) {
  CommandResult r = Up();
  ASSERT_EQ(r.exit_status, 0) << r.output;
  ASSERT_TRUE(FindMount(mnt_).has_value());
  std::optional<ClusterState> state = State();
  ASSERT_TRUE(state.has_value());
  const std::string both = absl::StrCat("127.0.0.1:", base_, ",127.0.0.1:", base_ + 3);
  EXPECT_EQ(state->meta_address, both);
  std::vector<std::string> roles;
  for (const DaemonRecord& d : state->daemons) roles.push_back(d.role);
  EXPECT_EQ(roles, (std::vector<std::string>{"etcd-0", "etcd-1", "etcd-2", "meta", "meta-standby",
                                             "storage-0", "storage-1", "fuse", "repair"}));
  for (const DaemonRecord& d : state->daemons) {
    const std::string cmdline = ReadWholeFile(absl::StrCat("/proc/", d.process.pid, "/cmdline"));
    if (d.role == "meta" || d.role == "meta-standby") {
      EXPECT_NE(cmdline.find("--kv_backend=etcd"), std::string::npos) << d.role;
      EXPECT_NE(cmdline.find("--etcd_shared"), std::string::npos) << d.role;
      // Both serve: each answers on its own address.
      EXPECT_TRUE(absl::StrContains(ReadWholeFile(d.log_path), "serving on")) << d.role;
    }
    if (d.role == "storage-0" || d.role == "fuse") {
      EXPECT_NE(cmdline.find("--meta=" + both), std::string::npos) << d.role << ": " << cmdline;
    }
    if (d.role == "etcd-0") {
      EXPECT_NE(cmdline.find("--max-txn-ops=100000"), std::string::npos) << cmdline;
      EXPECT_NE(cmdline.find("--data-dir=" + state_ + "/etcd/member-0"), std::string::npos);
    }
  }

  r = Run({"status", "--state-dir", state_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("2 storage servers, 2 up"), std::string::npos) << r.output;

  std::string data(300000, '\0');
  std::mt19937 rng(11);
  for (char& c : data) c = static_cast<char>(rng());
  {
    std::ofstream out(mnt_ + "/kept.bin", std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    ASSERT_TRUE(out.good());
  }

  DownAndExpectAllStopped(*state);
  EXPECT_FALSE(std::filesystem::exists(state_ + "/cluster.state"));

  // Up again on the same state directory, without --meta-backend: the etcd
  // data there is recognised, etcd restarts on it, and the namespace (and
  // the chunks on the storage servers) are found again.
  r = Up("");
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("using --meta-backend etcd"), std::string::npos) << r.output;
  EXPECT_TRUE(ReadWholeFile(mnt_ + "/kept.bin") == data);
  state = State();
  ASSERT_TRUE(state.has_value());
  DownAndExpectAllStopped(*state);
}

TEST_F(EtcdUpTest, UnknownBackendIsAUsageError) {
  CommandResult r =
      Run({"up", "--state-dir", state_, "--mountpoint", mnt_, "--meta-backend", "zookeeper"});
  EXPECT_EQ(r.exit_status, 2) << r.output;
  EXPECT_NE(r.output.find("rocksdb or etcd"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(state_ + "/cluster.state"));
}

}  // namespace
}  // namespace ckptfs::tools
