// Several metadata servers serving one etcd prefix at once (ckptfs-meta
// --etcd_shared), against a real 3-member etcd, with two storage servers
// given both. The test talks gRPC to each server directly (a channel to A, a
// channel to B, or one over "A,B" / "B,A" like a client's), so which server
// answers each call is the test's choice:
//   - a namespace operation through A is seen through B;
//   - exclusive creates of one name through A and B at once: exactly one
//     wins, the other gets EEXIST;
//   - a checkpoint whose ranks commit half through A and half through B
//     commits once, and every rank's commit returns COMMITTED;
//   - A is SIGKILLed while ranks wait on it during a storm of creates: the
//     ranks retry through B and the checkpoint commits with arrived == N
//     exactly, every create that succeeded is still there, no checkpoint is
//     listed torn;
//   - the orphan reclaimer runs on exactly one server, and on the other
//     once that one dies (its duty lock's lease runs out).
// Skipped when etcd-server is not installed.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/grpc_status.h"
#include "common/meta_channel.h"
#include "gtest/gtest.h"
#include "proto/meta.grpc.pb.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/child_process.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

using meta::MetaService;

constexpr int kStorageServers = 2;
constexpr char kPrefix[] = "/ckptfs-shared/";
constexpr uint64_t kRootIno = 1;
constexpr char kDutiesLine[] = "took the cluster duties";

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

std::string WholeLog(const ChildProcess& child) {
  std::ifstream in(child.log_path());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A stub on a channel to `target` (one address, or MetaChannelTarget's).
std::unique_ptr<MetaService::Stub> Stub(const std::string& list) {
  absl::StatusOr<std::string> target = MetaChannelTarget(list);
  if (!target.ok()) return nullptr;
  return MetaService::NewStub(grpc::CreateChannel(*target, grpc::InsecureChannelCredentials()));
}

template <typename Call>
absl::Status Rpc(const char* name, Call call, absl::Duration timeout = absl::Seconds(30)) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return FromGrpcStatus(call(context), name);
}

absl::StatusOr<meta::Attr> Mkdir(MetaService::Stub& stub, uint64_t parent,
                                 const std::string& name) {
  meta::MkdirRequest request;
  request.set_parent(parent);
  request.set_name(name);
  request.set_mode(0755);
  meta::AttrReply reply;
  absl::Status s =
      Rpc("Mkdir", [&](grpc::ClientContext& c) { return stub.Mkdir(&c, request, &reply); });
  if (!s.ok()) return s;
  return reply.attr();
}

absl::StatusOr<meta::Attr> CreateExclusive(MetaService::Stub& stub, uint64_t parent,
                                           const std::string& name) {
  meta::CreateRequest request;
  request.set_parent(parent);
  request.set_name(name);
  request.set_mode(0644);
  request.set_exclusive(true);
  meta::CreateReply reply;
  absl::Status s =
      Rpc("Create", [&](grpc::ClientContext& c) { return stub.Create(&c, request, &reply); });
  if (!s.ok()) return s;
  return reply.attr();
}

absl::StatusOr<meta::Attr> Lookup(MetaService::Stub& stub, uint64_t parent,
                                  const std::string& name) {
  meta::LookupRequest request;
  request.set_parent(parent);
  request.set_name(name);
  meta::AttrReply reply;
  absl::Status s =
      Rpc("Lookup", [&](grpc::ClientContext& c) { return stub.Lookup(&c, request, &reply); });
  if (!s.ok()) return s;
  return reply.attr();
}

absl::StatusOr<meta::CheckpointInfo> GetCheckpoint(MetaService::Stub& stub, uint64_t ino) {
  meta::InodeRequest request;
  request.set_ino(ino);
  meta::CheckpointInfo reply;
  absl::Status s = Rpc("GetCheckpoint", [&](grpc::ClientContext& c) {
    return stub.GetCheckpoint(&c, request, &reply);
  });
  if (!s.ok()) return s;
  return reply;
}

// One rank's commit as libckptfs does it: long polls until the checkpoint
// ends, calling again after PENDING or a lost connection (UNAVAILABLE: the
// channel moves on to the next server of its list).
absl::StatusOr<meta::CheckpointInfo> CommitRank(MetaService::Stub& stub, uint64_t ino,
                                                uint32_t rank) {
  const absl::Time give_up = absl::Now() + absl::Seconds(90);
  while (absl::Now() < give_up) {
    meta::CommitCheckpointRequest request;
    request.set_ino(ino);
    request.set_rank(rank);
    request.set_wait_ms(2000);
    meta::CheckpointInfo reply;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const grpc::Status status = stub.CommitCheckpoint(&context, request, &reply);
    if (status.ok()) {
      if (reply.state() != meta::PENDING) return reply;
      continue;
    }
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      absl::SleepFor(absl::Milliseconds(100));
      continue;
    }
    return FromGrpcStatus(status, "CommitCheckpoint");
  }
  return absl::DeadlineExceededError("the commit did not end within 90 s");
}

class MetaSharedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdBinary().empty()) GTEST_SKIP() << "etcd-server is not installed";
    auto etcd = EtcdCluster::Start(3);
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    auto root = MakeTempDir("ckptfs-shared-");
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = *root;
    for (std::string* address : {&address_a_, &address_b_}) {
      auto port = PickFreePort();
      ASSERT_TRUE(port.ok()) << port.status();
      *address = absl::StrCat("127.0.0.1:", *port);
    }
    // Both serve: neither waits for the other.
    ASSERT_NO_FATAL_FAILURE(StartMeta(address_a_, "meta-a", &meta_a_));
    ASSERT_NO_FATAL_FAILURE(StartMeta(address_b_, "meta-b", &meta_b_));
    for (auto* meta : {&meta_a_, &meta_b_}) {
      ASSERT_TRUE(WaitFor([&] { return absl::StrContains((*meta)->LogTail(), "serving on"); }))
          << Describe();
    }
    a_ = Stub(address_a_);
    b_ = Stub(address_b_);
    ASSERT_TRUE(a_ != nullptr && b_ != nullptr);

    for (int i = 0; i < kStorageServers; ++i) {
      auto port = PickFreePort();
      ASSERT_TRUE(port.ok());
      const std::string dir = absl::StrCat(root_, "/storage-", i);
      ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
      // Half the storage servers start on A, half on B.
      const std::string list =
          i % 2 == 0 ? address_a_ + "," + address_b_ : address_b_ + "," + address_a_;
      auto child = ChildProcess::Start(
          {BinDir() + "/ckptfs-storage", absl::StrCat("--listen=127.0.0.1:", *port),
           "--data_dir=" + dir, "--meta=" + list, "--heartbeat_interval_s=1"},
          absl::StrCat(root_, "/storage-", i, ".log"));
      ASSERT_TRUE(child.ok()) << child.status();
      storage_.push_back(*std::move(child));
    }
    // Both servers see both storage servers alive (heartbeats are stored).
    for (MetaService::Stub* stub : {a_.get(), b_.get()}) {
      ASSERT_TRUE(WaitFor([&] { return AliveServers(*stub) == kStorageServers; })) << Describe();
    }
  }

  void TearDown() override {
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
         "--etcd_shared", "--etcd_lock_ttl_s=10", "--reclaim_interval_s=1", "--orphan_grace_s=0",
         "--replicas=1"},
        absl::StrCat(root_, "/", name, ".log"));
    ASSERT_TRUE(child.ok()) << child.status();
    *out = *std::move(child);
  }

  int AliveServers(MetaService::Stub& stub) {
    meta::ListServersReply reply;
    absl::Status s = Rpc(
        "ListServers",
        [&](grpc::ClientContext& c) { return stub.ListServers(&c, meta::Empty(), &reply); },
        absl::Seconds(2));
    if (!s.ok()) return 0;
    int alive = 0;
    for (const auto& server : reply.servers()) alive += server.alive() ? 1 : 0;
    return alive;
  }

  // A checkpoint directory `name` under the root with `files` empty files,
  // declared for `ranks` ranks; its inode.
  uint64_t MakeCheckpoint(const std::string& name, uint32_t ranks) {
    absl::StatusOr<meta::Attr> dir = Mkdir(*a_, kRootIno, name);
    EXPECT_TRUE(dir.ok()) << dir.status();
    if (!dir.ok()) return 0;
    for (uint32_t r = 0; r < ranks; ++r) {
      // Each rank's file through the server it commits through.
      MetaService::Stub& stub = r % 2 == 0 ? *a_ : *b_;
      absl::StatusOr<meta::Attr> file = CreateExclusive(stub, dir->ino(), absl::StrCat("rank_", r));
      EXPECT_TRUE(file.ok()) << file.status();
    }
    meta::DeclareCheckpointRequest declare;
    declare.set_ino(dir->ino());
    declare.set_ranks(ranks);
    meta::CheckpointInfo info;
    absl::Status s = Rpc("DeclareCheckpoint", [&](grpc::ClientContext& c) {
      return b_->DeclareCheckpoint(&c, declare, &info);
    });
    EXPECT_TRUE(s.ok()) << s;
    return dir->ino();
  }

  std::string Describe() {
    return absl::StrCat("--- meta-a:\n", meta_a_ ? meta_a_->LogTail(3000) : "", "\n--- meta-b:\n",
                        meta_b_ ? meta_b_->LogTail(3000) : "");
  }

  std::unique_ptr<EtcdCluster> etcd_;
  std::string root_, address_a_, address_b_;
  std::unique_ptr<ChildProcess> meta_a_, meta_b_;
  std::vector<std::unique_ptr<ChildProcess>> storage_;
  std::unique_ptr<MetaService::Stub> a_, b_;
};

TEST_F(MetaSharedTest, NamespaceChangesThroughOneAreSeenThroughTheOther) {
  absl::StatusOr<meta::Attr> dir = Mkdir(*a_, kRootIno, "made_on_a");
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<meta::Attr> seen = Lookup(*b_, kRootIno, "made_on_a");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->ino(), dir->ino());

  absl::StatusOr<meta::Attr> file = CreateExclusive(*b_, dir->ino(), "made_on_b");
  ASSERT_TRUE(file.ok()) << file.status();
  seen = Lookup(*a_, dir->ino(), "made_on_b");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->ino(), file->ino());

  // Inode numbers come from batches each server reserves in the store:
  // never the same twice across servers.
  std::set<uint64_t> inos{dir->ino(), file->ino()};
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<meta::Attr> made =
        CreateExclusive(i % 2 == 0 ? *a_ : *b_, dir->ino(), absl::StrCat("f", i));
    ASSERT_TRUE(made.ok()) << made.status();
    EXPECT_TRUE(inos.insert(made->ino()).second) << "inode " << made->ino() << " twice";
  }

  // rmdir through A of the directory B just filled: ENOTEMPTY.
  meta::LookupRequest rmdir;
  rmdir.set_parent(kRootIno);
  rmdir.set_name("made_on_a");
  meta::Empty empty;
  absl::Status s =
      Rpc("Rmdir", [&](grpc::ClientContext& c) { return a_->Rmdir(&c, rmdir, &empty); });
  EXPECT_EQ(ErrnoFromStatus(s), ENOTEMPTY) << s;
}

TEST_F(MetaSharedTest, ConcurrentExclusiveCreatesOfOneNameOneWins) {
  absl::StatusOr<meta::Attr> dir = Mkdir(*a_, kRootIno, "race");
  ASSERT_TRUE(dir.ok()) << dir.status();
  constexpr int kNames = 12;
  for (int i = 0; i < kNames; ++i) {
    const std::string name = absl::StrCat("n", i);
    absl::StatusOr<meta::Attr> on_a, on_b;
    std::thread racer([&] { on_a = CreateExclusive(*a_, dir->ino(), name); });
    on_b = CreateExclusive(*b_, dir->ino(), name);
    racer.join();
    EXPECT_NE(on_a.ok(), on_b.ok()) << name << ": A " << on_a.status() << ", B " << on_b.status();
    const absl::Status& loser = on_a.ok() ? on_b.status() : on_a.status();
    EXPECT_EQ(ErrnoFromStatus(loser), EEXIST) << name << ": " << loser;
  }
}

TEST_F(MetaSharedTest, CheckpointCommittedThroughBothServersCommitsOnce) {
  constexpr uint32_t kRanks = 8;
  const uint64_t ino = MakeCheckpoint("step_1", kRanks);
  ASSERT_NE(ino, 0u);
  std::vector<absl::StatusOr<meta::CheckpointInfo>> results(kRanks, absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  for (uint32_t r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] { results[r] = CommitRank(r % 2 == 0 ? *a_ : *b_, ino, r); });
  }
  for (std::thread& t : ranks) t.join();
  for (uint32_t r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status() << "\n"
                                 << Describe();
    EXPECT_EQ(results[r]->state(), meta::COMMITTED) << "rank " << r;
  }
  // One commit: every rank saw the same one (its end time), and both
  // servers report it.
  for (uint32_t r = 1; r < kRanks; ++r) {
    EXPECT_EQ(results[r]->ended_ms(), results[0]->ended_ms()) << "rank " << r;
  }
  for (MetaService::Stub* stub : {a_.get(), b_.get()}) {
    absl::StatusOr<meta::CheckpointInfo> info = GetCheckpoint(*stub, ino);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->state(), meta::COMMITTED);
    EXPECT_EQ(info->ended_ms(), results[0]->ended_ms());
    EXPECT_EQ(info->files(), kRanks);
  }
}

TEST_F(MetaSharedTest, ServerKilledWhileRanksWaitDuringACreateStorm) {
  constexpr uint32_t kRanks = 8;
  const uint64_t ino = MakeCheckpoint("step_2", kRanks);
  ASSERT_NE(ino, 0u);
  absl::StatusOr<meta::Attr> storm_dir = Mkdir(*b_, kRootIno, "storm");
  ASSERT_TRUE(storm_dir.ok()) << storm_dir.status();
  const std::string a_first = address_a_ + "," + address_b_;
  const std::string b_first = address_b_ + "," + address_a_;

  // A storm of creates through both servers (each writer's channel starts
  // on one and moves to the other when it breaks); a name whose create
  // succeeded must exist afterwards.
  std::atomic<bool> stop{false};
  std::vector<std::vector<std::string>> created(4);
  std::vector<std::thread> storm;
  for (int w = 0; w < 4; ++w) {
    storm.emplace_back([&, w] {
      std::unique_ptr<MetaService::Stub> stub = Stub(w % 2 == 0 ? a_first : b_first);
      for (int i = 0; !stop.load(); ++i) {
        const std::string name = absl::StrCat("w", w, "_", i);
        absl::StatusOr<meta::Attr> made = CreateExclusive(*stub, storm_dir->ino(), name);
        if (made.ok()) created[w].push_back(name);
      }
    });
  }
  // All ranks but the last commit, half starting on A and half on B, and
  // wait.
  std::vector<absl::StatusOr<meta::CheckpointInfo>> results(kRanks, absl::UnknownError("not run"));
  std::vector<std::unique_ptr<MetaService::Stub>> rank_stubs;
  for (uint32_t r = 0; r < kRanks; ++r) rank_stubs.push_back(Stub(r % 2 == 0 ? a_first : b_first));
  std::vector<std::thread> ranks;
  for (uint32_t r = 0; r + 1 < kRanks; ++r) {
    ranks.emplace_back([&, r] { results[r] = CommitRank(*rank_stubs[r], ino, r); });
  }
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<meta::CheckpointInfo> info = GetCheckpoint(*b_, ino);
    return info.ok() && info->arrived() == kRanks - 1;
  })) << Describe();

  // A dies with ranks waiting on it and creates in flight.
  ASSERT_TRUE(meta_a_->Stop(SIGKILL, absl::Seconds(10)).has_value());
  absl::StatusOr<meta::CheckpointInfo> info = GetCheckpoint(*b_, ino);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state(), meta::PENDING);
  EXPECT_EQ(info->arrived(), kRanks - 1) << "an arrival lost or counted twice";

  // The last rank, on a channel that starts at the dead server.
  ranks.emplace_back(
      [&] { results[kRanks - 1] = CommitRank(*rank_stubs[kRanks - 1], ino, kRanks - 1); });
  for (std::thread& t : ranks) t.join();
  stop.store(true);
  for (std::thread& t : storm) t.join();

  for (uint32_t r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status() << "\n"
                                 << Describe();
    EXPECT_EQ(results[r]->state(), meta::COMMITTED) << "rank " << r;
  }
  info = GetCheckpoint(*b_, ino);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state(), meta::COMMITTED);
  EXPECT_EQ(info->arrived(), kRanks);
  EXPECT_EQ(info->files(), kRanks);

  // No torn checkpoint listed: the root's checkpoints are all ended, and
  // step_2 is the committed one.
  meta::InodeRequest list_request;
  list_request.set_ino(kRootIno);
  meta::ListCheckpointsReply list;
  absl::Status s = Rpc("ListCheckpoints", [&](grpc::ClientContext& c) {
    return b_->ListCheckpoints(&c, list_request, &list);
  });
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(list.checkpoints_size(), 1);
  EXPECT_EQ(list.checkpoints(0).name(), "step_2");
  EXPECT_EQ(list.checkpoints(0).state(), meta::COMMITTED);

  size_t total = 0;
  for (const std::vector<std::string>& names : created) {
    for (const std::string& name : names) {
      absl::StatusOr<meta::Attr> there = Lookup(*b_, storm_dir->ino(), name);
      EXPECT_TRUE(there.ok()) << name << ": " << there.status();
      ++total;
    }
  }
  EXPECT_GT(total, 0u);
}

TEST_F(MetaSharedTest, OrphanReclaimerRunsOnOneServerAtATime) {
  ASSERT_TRUE(WaitFor([&] {
    return Count(WholeLog(*meta_a_), kDutiesLine) + Count(WholeLog(*meta_b_), kDutiesLine) > 0;
  })) << Describe();
  // Give the other one time to take the duties too if it wrongly would.
  absl::SleepFor(absl::Seconds(2));
  // One server took them (on a loaded machine the holder may lose its
  // lease and take them again: a count of lines is not asserted).
  const int on_a = Count(WholeLog(*meta_a_), kDutiesLine);
  const int on_b = Count(WholeLog(*meta_b_), kDutiesLine);
  ASSERT_TRUE((on_a > 0) != (on_b > 0)) << "on a: " << on_a << ", on b: " << on_b << "\n"
                                        << Describe();
  std::unique_ptr<ChildProcess>& holder = on_a > 0 ? meta_a_ : meta_b_;
  std::unique_ptr<ChildProcess>& other = on_a > 0 ? meta_b_ : meta_a_;
  // The holder dies: the other takes the duties over (its lease ran out,
  // within the 10 s TTL).
  ASSERT_TRUE(holder->Stop(SIGKILL, absl::Seconds(10)).has_value());
  ASSERT_TRUE(WaitFor([&] { return Count(WholeLog(*other), kDutiesLine) >= 1; })) << Describe();
}

// A server started without --etcd_shared on a prefix that shared servers
// serve refuses to start (it would count barriers alone), naming a shared
// server and the flag; the shared ones serve on.
TEST_F(MetaSharedTest, AnExclusiveServerRefusesToJoinSharedServers) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  auto exclusive =
      ChildProcess::Start({BinDir() + "/ckptfs-meta", absl::StrCat("--listen=127.0.0.1:", *port),
                           "--kv_backend=etcd", "--etcd_endpoints=" + etcd_->endpoints(),
                           std::string("--etcd_prefix=") + kPrefix, "--etcd_lock_ttl_s=10"},
                          absl::StrCat(root_, "/meta-exclusive.log"));
  ASSERT_TRUE(exclusive.ok()) << exclusive.status();
  const std::optional<int> code = (*exclusive)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << (*exclusive)->LogTail();
  EXPECT_NE(*code, 0);
  const std::string log = (*exclusive)->LogTail();
  EXPECT_TRUE(absl::StrContains(log, "start this one with --etcd_shared")) << log;
  EXPECT_FALSE(absl::StrContains(log, "serving on")) << log;
  EXPECT_TRUE(meta_a_->Running() && meta_b_->Running()) << Describe();
  EXPECT_EQ(AliveServers(*a_), kStorageServers);
}

// The other way round: a shared server refuses to start beside a server
// that serves the prefix alone.
TEST(MetaServingModeTest, ASharedServerRefusesToJoinAnExclusiveServer) {
  if (EtcdBinary().empty()) GTEST_SKIP() << "etcd-server is not installed";
  auto etcd = EtcdCluster::Start(3);
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  auto root = MakeTempDir("ckptfs-mode-");
  ASSERT_TRUE(root.ok()) << root.status();
  struct Cleanup {
    std::string root;
    ~Cleanup() {
      if (std::getenv("CKPTFS_KEEP_TEST_DIR") == nullptr) RemoveTree(root);
    }
  } cleanup{*root};
  auto start = [&](const std::string& name, bool shared) {
    auto port = PickFreePort();
    std::vector<std::string> argv = {BinDir() + "/ckptfs-meta",
                                     absl::StrCat("--listen=127.0.0.1:", port.ok() ? *port : 1),
                                     "--kv_backend=etcd",
                                     "--etcd_endpoints=" + (*etcd)->endpoints(),
                                     std::string("--etcd_prefix=") + kPrefix,
                                     "--etcd_lock_ttl_s=10"};
    if (shared) argv.push_back("--etcd_shared");
    return ChildProcess::Start(argv, absl::StrCat(*root, "/", name, ".log"));
  };
  auto alone = start("meta-alone", false);
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains((*alone)->LogTail(), "serving on"); }))
      << (*alone)->LogTail();
  auto shared = start("meta-shared", true);
  ASSERT_TRUE(shared.ok()) << shared.status();
  const std::optional<int> code = (*shared)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.has_value()) << (*shared)->LogTail();
  EXPECT_NE(*code, 0);
  const std::string log = (*shared)->LogTail();
  EXPECT_TRUE(absl::StrContains(log, "started without --etcd_shared")) << log;
  EXPECT_FALSE(absl::StrContains(log, "serving on")) << log;
  EXPECT_TRUE((*alone)->Running()) << (*alone)->LogTail();
  (*alone)->Stop(SIGTERM, absl::Seconds(10));
}

TEST(SpreadMetaChannelTargetTest, RotatesTheList) {
  EXPECT_EQ(*SpreadMetaChannelTarget("10.0.0.1:1,10.0.0.2:2,10.0.0.3:3", 1),
            "ipv4:10.0.0.2:2,10.0.0.3:3,10.0.0.1:1");
  EXPECT_EQ(*SpreadMetaChannelTarget("10.0.0.1:1,10.0.0.2:2", 3), "ipv4:10.0.0.2:2,10.0.0.1:1");
  EXPECT_EQ(*SpreadMetaChannelTarget("10.0.0.1:1,10.0.0.2:2", 0), "ipv4:10.0.0.1:1,10.0.0.2:2");
  EXPECT_EQ(*SpreadMetaChannelTarget("meta.example:7000", 5), "meta.example:7000");
  // The per-process offset: some rotation of the same list.
  absl::StatusOr<std::string> any = SpreadMetaChannelTarget("10.0.0.1:1,10.0.0.2:2");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(*any == "ipv4:10.0.0.1:1,10.0.0.2:2" || *any == "ipv4:10.0.0.2:2,10.0.0.1:1") << *any;
  EXPECT_FALSE(SpreadMetaChannelTarget("10.0.0.1:1,host:2", 1).ok());
}

}  // namespace
}  // namespace ckptfs::testing
