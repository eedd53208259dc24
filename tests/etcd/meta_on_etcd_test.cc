// The metadata service on etcd (--kv_backend=etcd), end to end: a real
// 3-member etcd, ckptfs-meta on it, 4 storage servers and a FUSE mount.
//   - files and a 4-rank checkpoint commit through the mount, and all of it
//     still there after the metadata server restarts (state lives in etcd);
//   - the etcd leader SIGKILLed in the middle of a save storm with a commit:
//     the checkpoint commits and every byte reads back;
//   - a second metadata server on the same prefix waits as a standby and
//     takes over, with the namespace intact, when the first is SIGKILLed.
// Skipped when etcd-server is not installed.
#include <signal.h>
#include <sys/xattr.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/child_process.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

std::string GetXattr(const std::string& path, const std::string& name) {
  char value[4096];
  const ssize_t n = getxattr(path.c_str(), name.c_str(), value, sizeof(value));
  if (n < 0) return absl::StrCat("error: ", std::strerror(errno));
  return std::string(value, static_cast<size_t>(n));
}

class MetaOnEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdBinary().empty()) GTEST_SKIP() << "etcd-server is not installed";
    auto etcd = EtcdCluster::Start(3);
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    LocalClusterOptions options;
    options.meta_flags = {"--kv_backend=etcd", "--etcd_endpoints=" + etcd_->endpoints(),
                          "--etcd_prefix=/ckptfs-test/",
                          // Room to ride out an etcd leader election on a
                          // loaded machine (the lock's keepalive gives up
                          // after a TTL without a renewal).
                          "--etcd_lock_ttl_s=10"};
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status() << "\n" << etcd_->DescribeLogs();
    cluster_ = *std::move(cluster);
    auto mnt = cluster_->Mount("mnt");
    ASSERT_TRUE(mnt.ok()) << mnt.status() << "\n" << cluster_->DescribeLogs();
    mnt_ = *mnt;
  }
  void TearDown() override {
    standby_.reset();
    cluster_.reset();
    etcd_.reset();
  }

  // Declares `ranks` ranks on DIR, writes rank_R.pt (size bytes each, in
  // 1 MiB writes) and commits every rank from its own thread; `during` runs
  // once half the ranks have written. Returns the checkpoint's state.
  std::string SaveCheckpoint(const std::string& dir, int ranks, size_t size,
                             const std::function<void()>& during = nullptr) {
    const std::string n = absl::StrCat(ranks);
    EXPECT_EQ(setxattr(dir.c_str(), "user.ckptfs.ranks", n.data(), n.size(), 0), 0)
        << std::strerror(errno);
    std::atomic<int> written{0};
    std::vector<std::thread> threads;
    std::vector<std::string> results(ranks);
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        absl::Status s = WriteWholeFile(absl::StrCat(dir, "/rank_", r, ".pt"), TestData(size, r));
        EXPECT_TRUE(s.ok()) << s;
        written.fetch_add(1);
        results[r] = GetXattr(dir, absl::StrCat("user.ckptfs.commit.", r));
      });
    }
    if (during) {
      while (written.load() < ranks / 2) absl::SleepFor(absl::Milliseconds(5));
      during();
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(results[r], "committed") << "rank " << r;
    return GetXattr(dir, "user.ckptfs.state");
  }

  void ExpectRanksReadBack(const std::string& dir, int ranks, size_t size) {
    for (int r = 0; r < ranks; ++r) {
      absl::StatusOr<std::string> data = ReadWholeFile(absl::StrCat(dir, "/rank_", r, ".pt"));
      ASSERT_TRUE(data.ok()) << data.status();
      EXPECT_TRUE(*data == TestData(size, r)) << "rank " << r << " differs";
    }
  }

  std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<ChildProcess> standby_;
  std::string mnt_;
};

TEST_F(MetaOnEtcdTest, CheckpointCommitsAndSurvivesAMetaRestart) {
  ASSERT_EQ(mkdir((mnt_ + "/run1").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((mnt_ + "/run1/step_1").c_str(), 0755), 0);
  EXPECT_EQ(SaveCheckpoint(mnt_ + "/run1/step_1", 4, 3 << 20), "committed");
  EXPECT_EQ(GetXattr(mnt_ + "/run1", "user.ckptfs.latest"), "step_1");

  ASSERT_TRUE(cluster_->StopMeta(SIGTERM).ok());
  ASSERT_TRUE(cluster_->StartMeta().ok()) << cluster_->DescribeLogs();
  ExpectRanksReadBack(mnt_ + "/run1/step_1", 4, 3 << 20);
  EXPECT_EQ(GetXattr(mnt_ + "/run1/step_1", "user.ckptfs.state"), "committed");
}

TEST_F(MetaOnEtcdTest, EtcdLeaderKilledDuringASaveStorm) {
  ASSERT_EQ(mkdir((mnt_ + "/step_2").c_str(), 0755), 0);
  const std::string state = SaveCheckpoint(mnt_ + "/step_2", 8, 4 << 20, [&] {
    absl::StatusOr<int> leader = etcd_->Leader();
    ASSERT_TRUE(leader.ok()) << leader.status();
    ASSERT_TRUE(etcd_->Kill(*leader).ok());
  });
  EXPECT_EQ(state, "committed") << cluster_->DescribeLogs();
  ExpectRanksReadBack(mnt_ + "/step_2", 8, 4 << 20);
}

TEST_F(MetaOnEtcdTest, StandbyTakesOverTheNamespace) {
  const std::string data = TestData(5 << 20, 9);
  ASSERT_TRUE(WriteWholeFile(mnt_ + "/before", data).ok());

  absl::StatusOr<uint16_t> port = PickFreePort();
  ASSERT_TRUE(port.ok());
  const std::string standby_address = absl::StrCat("127.0.0.1:", *port);
  auto standby = ChildProcess::Start(
      {BinDir() + "/ckptfs-meta", "--listen=" + standby_address, "--kv_backend=etcd",
       "--etcd_endpoints=" + etcd_->endpoints(), "--etcd_prefix=/ckptfs-test/",
       "--etcd_lock_ttl_s=3", "--credential_file=" + cluster_->credential_file(),
       "--server_credential_file=" + cluster_->server_credential_file(), "--replicas=1"},
      cluster_->root() + "/standby.log");
  ASSERT_TRUE(standby.ok()) << standby.status();
  standby_ = *std::move(standby);
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!absl::StrContains(standby_->LogTail(), "standby") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(absl::StrContains(standby_->LogTail(), "standby")) << standby_->LogTail();
  EXPECT_FALSE(absl::StrContains(standby_->LogTail(), "serving on")) << standby_->LogTail();

  ASSERT_TRUE(cluster_->StopMeta(SIGKILL).ok());
  deadline = absl::Now() + absl::Seconds(30);
  while (!absl::StrContains(standby_->LogTail(), "serving on") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(absl::StrContains(standby_->LogTail(), "serving on")) << standby_->LogTail();

  // A mount of the standby sees the namespace as it was.
  const std::string second = cluster_->root() + "/second";
  ASSERT_EQ(mkdir(second.c_str(), 0755), 0);
  // With the cluster's credential, as the storage servers require it.
  auto mount = ChildProcess::Start(
      {BinDir() + "/ckptfs-fuse", "--meta=" + standby_address, "--mountpoint=" + second,
       "--foreground", "--credential_file=" + cluster_->credential_file()},
      cluster_->root() + "/second.log");
  ASSERT_TRUE(mount.ok());
  deadline = absl::Now() + absl::Seconds(30);
  while (!IsCkptfsMount(second) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(IsCkptfsMount(second)) << (*mount)->LogTail();
  absl::StatusOr<std::string> back = ReadWholeFile(second + "/before");
  EXPECT_TRUE(back.ok() && *back == data) << back.status();
  std::string ignored;
  RunShell("fusermount3 -u " + second, &ignored);
  (*mount)->Stop(SIGTERM, absl::Seconds(10));
  standby_->Stop(SIGTERM, absl::Seconds(10));
}

}  // namespace
}  // namespace ckptfs::testing
