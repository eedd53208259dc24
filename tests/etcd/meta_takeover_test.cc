// Two metadata servers on one etcd prefix, everyone given both ("A,B"):
// storage servers and a FUSE mount reach whichever serves and follow the
// namespace to the standby when the serving one is SIGKILLed.
//   - ranks wait in a checkpoint commit on A; A dies; B takes over; the
//     waiting commits are carried over by the client's retries and, once the
//     last rank commits on B, every commit returns committed. Before that
//     last rank, B reports the arrivals of the waiting ranks exactly once
//     (arrived=3 of 4, still pending): none lost, none counted twice. The
//     files read back.
//   - a file written across the takeover (a write stream that keeps going
//     while A dies, and a file created after) reads back whole.
// Skipped when etcd-server is not installed.
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/meta_channel.h"
#include "gtest/gtest.h"
#include "proto/meta.grpc.pb.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/child_process.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

constexpr int kStorageServers = 4;
constexpr char kPrefix[] = "/ckptfs-takeover/";

std::string GetXattr(const std::string& path, const std::string& name) {
  char value[4096];
  const ssize_t n = getxattr(path.c_str(), name.c_str(), value, sizeof(value));
  if (n < 0) return absl::StrCat("error: ", std::strerror(errno));
  return std::string(value, static_cast<size_t>(n));
}

// Polls `done` every 50 ms for up to `timeout` (a bound on a hang, not an
// assertion on speed).
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(60)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

class MetaTakeoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdBinary().empty()) GTEST_SKIP() << "etcd-server is not installed";
    auto etcd = EtcdCluster::Start(3);
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    auto root = MakeTempDir("ckptfs-takeover-");
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = *root;
    for (std::string* address : {&address_a_, &address_b_}) {
      auto port = PickFreePort();
      ASSERT_TRUE(port.ok()) << port.status();
      *address = absl::StrCat("127.0.0.1:", *port);
    }
    both_ = address_a_ + "," + address_b_;

    ASSERT_NO_FATAL_FAILURE(StartMeta(address_a_, "meta-a", &meta_a_));
    ASSERT_TRUE(WaitFor([&] { return absl::StrContains(meta_a_->LogTail(), "serving on"); }))
        << meta_a_->LogTail();
    ASSERT_NO_FATAL_FAILURE(StartMeta(address_b_, "meta-b", &meta_b_));
    ASSERT_TRUE(WaitFor([&] { return absl::StrContains(meta_b_->LogTail(), "standby"); }))
        << meta_b_->LogTail();

    for (int i = 0; i < kStorageServers; ++i) {
      auto port = PickFreePort();
      ASSERT_TRUE(port.ok());
      const std::string dir = absl::StrCat(root_, "/storage-", i);
      ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
      auto child = ChildProcess::Start(
          {BinDir() + "/ckptfs-storage", absl::StrCat("--listen=127.0.0.1:", *port),
           "--data_dir=" + dir, "--meta=" + both_, "--heartbeat_interval_s=1"},
          absl::StrCat(root_, "/storage-", i, ".log"));
      ASSERT_TRUE(child.ok()) << child.status();
      storage_.push_back(*std::move(child));
    }
    ASSERT_TRUE(WaitFor([&] { return AliveServers() == kStorageServers; }))
        << AliveServers() << " storage servers alive\n"
        << storage_[0]->LogTail();

    mnt_ = root_ + "/mnt";
    ASSERT_EQ(::mkdir(mnt_.c_str(), 0755), 0);
    auto fuse = ChildProcess::Start(
        {BinDir() + "/ckptfs-fuse", "--meta=" + both_, "--mountpoint=" + mnt_, "--foreground"},
        root_ + "/fuse.log");
    ASSERT_TRUE(fuse.ok()) << fuse.status();
    fuse_ = *std::move(fuse);
    ASSERT_TRUE(WaitFor([&] { return !fuse_->Running() || IsCkptfsMount(mnt_); }));
    ASSERT_TRUE(IsCkptfsMount(mnt_)) << fuse_->LogTail();
  }

  void TearDown() override {
    if (fuse_ != nullptr) {
      std::string ignored;
      RunShell("fusermount3 -u " + mnt_ + " || fusermount3 -u -z " + mnt_, &ignored);
      fuse_->Stop(SIGKILL, absl::Seconds(10));
    }
    for (auto& s : storage_) s->Stop(SIGKILL, absl::Seconds(10));
    for (auto* meta : {&meta_a_, &meta_b_}) {
      if (*meta != nullptr) (*meta)->Stop(SIGKILL, absl::Seconds(10));
    }
    etcd_.reset();
    if (!root_.empty() && std::getenv("CKPTFS_KEEP_TEST_DIR") == nullptr) RemoveTree(root_);
  }

  void StartMeta(const std::string& address, const std::string& name,
                 std::unique_ptr<ChildProcess>* out) {
    auto child = ChildProcess::Start(
        {BinDir() + "/ckptfs-meta", "--listen=" + address, "--kv_backend=etcd",
         "--etcd_endpoints=" + etcd_->endpoints(), std::string("--etcd_prefix=") + kPrefix,
         "--etcd_lock_ttl_s=6", "--replicas=1"},
        absl::StrCat(root_, "/", name, ".log"));
    ASSERT_TRUE(child.ok()) << child.status();
    *out = *std::move(child);
  }

  // Storage servers alive in ListServers of whichever metadata server
  // serves (through the same kind of channel the daemons use).
  int AliveServers() {
    if (stub_ == nullptr) {
      absl::StatusOr<std::string> target = MetaChannelTarget(both_);
      if (!target.ok()) return -1;
      stub_ = meta::MetaService::NewStub(
          grpc::CreateChannel(*target, grpc::InsecureChannelCredentials()));
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    meta::ListServersReply reply;
    if (!stub_->ListServers(&context, meta::Empty(), &reply).ok()) return 0;
    int alive = 0;
    for (const auto& server : reply.servers()) alive += server.alive() ? 1 : 0;
    return alive;
  }

  // SIGKILLs A and waits until B serves.
  void KillActiveAndWaitForTakeover() {
    ASSERT_TRUE(meta_a_->Stop(SIGKILL, absl::Seconds(10)).has_value());
    ASSERT_TRUE(WaitFor([&] { return absl::StrContains(meta_b_->LogTail(), "serving on"); }))
        << meta_b_->LogTail();
  }

  std::string Describe() {
    std::string text = absl::StrCat("--- meta-a:\n", meta_a_ ? meta_a_->LogTail(2048) : "",
                                    "\n--- meta-b:\n", meta_b_ ? meta_b_->LogTail(2048) : "");
    if (fuse_) absl::StrAppend(&text, "\n--- fuse:\n", fuse_->LogTail(2048));
    return text;
  }

  std::unique_ptr<EtcdCluster> etcd_;
  std::string root_, address_a_, address_b_, both_, mnt_;
  std::unique_ptr<ChildProcess> meta_a_, meta_b_, fuse_;
  std::vector<std::unique_ptr<ChildProcess>> storage_;
  std::unique_ptr<meta::MetaService::Stub> stub_;
};

TEST_F(MetaTakeoverTest, WaitingCommitsCompleteOnTheStandby) {
  constexpr int kRanks = 4;
  constexpr size_t kSize = 3 << 20;
  const std::string dir = mnt_ + "/step_1";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const std::string n = absl::StrCat(kRanks);
  ASSERT_EQ(setxattr(dir.c_str(), "user.ckptfs.ranks", n.data(), n.size(), 0), 0)
      << std::strerror(errno);

  std::vector<std::string> results(kRanks);
  auto rank = [&](int r) {
    absl::Status s = WriteWholeFile(absl::StrCat(dir, "/rank_", r, ".pt"), TestData(kSize, r));
    EXPECT_TRUE(s.ok()) << s;
    results[r] = GetXattr(dir, absl::StrCat("user.ckptfs.commit.", r));
  };
  std::vector<std::thread> waiting;
  for (int r = 0; r < kRanks - 1; ++r) waiting.emplace_back(rank, r);
  // The first kRanks-1 ranks have arrived and wait in their commit on A.
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(GetXattr(dir, "user.ckptfs.info"), "arrived=3");
  })) << GetXattr(dir, "user.ckptfs.info")
      << "\n"
      << Describe();

  ASSERT_NO_FATAL_FAILURE(KillActiveAndWaitForTakeover());
  // B resumed the checkpoint from etcd: the waiting ranks, once each.
  const std::string info = GetXattr(dir, "user.ckptfs.info");
  EXPECT_TRUE(absl::StrContains(info, "state=pending")) << info;
  EXPECT_TRUE(absl::StrContains(info, "arrived=3")) << info;

  rank(kRanks - 1);
  for (std::thread& t : waiting) t.join();
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(results[r], "committed") << "rank " << r << "\n" << Describe();
  EXPECT_EQ(GetXattr(dir, "user.ckptfs.state"), "committed");
  EXPECT_TRUE(absl::StrContains(GetXattr(dir, "user.ckptfs.info"), "arrived=4"))
      << GetXattr(dir, "user.ckptfs.info");
  for (int r = 0; r < kRanks; ++r) {
    absl::StatusOr<std::string> data = ReadWholeFile(absl::StrCat(dir, "/rank_", r, ".pt"));
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_TRUE(*data == TestData(kSize, r)) << "rank " << r << " differs";
  }
}

TEST_F(MetaTakeoverTest, WritesAndReadsKeepWorkingAcrossTheTakeover) {
  const std::string before = TestData(2 << 20, 1);
  ASSERT_TRUE(WriteWholeFile(mnt_ + "/before", before).ok());

  // A stream of files written while A dies.
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; !stop.load() || i < 2; ++i) {
      absl::Status s =
          WriteWholeFile(absl::StrCat(mnt_, "/stream_", i), TestData(1 << 20, 100 + i));
      EXPECT_TRUE(s.ok()) << "stream_" << i << ": " << s;
      if (!s.ok()) return;
      written.store(i + 1);
    }
  });
  // Joined on every path: a failed ASSERT below must not leave the thread
  // joinable (std::terminate would skip the fixture's teardown and leave the
  // mount and daemons behind).
  auto join_writer = [&] {
    stop.store(true);
    if (writer.joinable()) writer.join();
  };
  struct JoinOnExit {
    std::function<void()> join;
    ~JoinOnExit() { join(); }
  } joined{join_writer};
  ASSERT_TRUE(WaitFor([&] { return written.load() >= 2; })) << Describe();
  ASSERT_NO_FATAL_FAILURE(KillActiveAndWaitForTakeover());
  const int at_takeover = written.load();
  ASSERT_TRUE(WaitFor([&] { return written.load() >= at_takeover + 2; })) << Describe();
  join_writer();

  const std::string after = TestData(2 << 20, 2);
  ASSERT_TRUE(WriteWholeFile(mnt_ + "/after", after).ok()) << Describe();
  absl::StatusOr<std::string> back = ReadWholeFile(mnt_ + "/before");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == before);
  back = ReadWholeFile(mnt_ + "/after");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == after);
  for (int i = 0; i < written.load(); ++i) {
    back = ReadWholeFile(absl::StrCat(mnt_, "/stream_", i));
    ASSERT_TRUE(back.ok()) << "stream_" << i << ": " << back.status();
    EXPECT_TRUE(*back == TestData(1 << 20, 100 + i)) << "stream_" << i;
  }
}

}  // namespace
}  // namespace ckptfs::testing
