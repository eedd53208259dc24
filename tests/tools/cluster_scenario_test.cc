// One `ckptfs up` cluster of the real daemons of this build taken through
// what an operator does with it, step by step, each step's failures naming
// it:
//   1. up: the daemons recorded in the state file with the flags asked for
//      (chunk size, orphan grace, metrics ports, the repairer with --watch)
//      and, on etcd, 3 members and two metadata servers serving at once;
//      the etcd members answer the metadata servers' client certificate
//      only (not plain text, not TLS without a certificate);
//   2. status: the servers;
//   3. a second mount of the same cluster (`mount`/`umount`) sees a file
//      written through the first; mounting over it is refused; its
//      ckptfs-fuse exits on umount;
//   4. status (text and --json, parsed back into the reply message) shows
//      the servers, the mount (by the metadata server it uses: on etcd each
//      lists its own clients) and a pending checkpoint's arrived ranks; by
//      address the credential must be given;
//   5. committed checkpoints: `ckpt show` (CRC32C of the bytes written),
//      `ckpt verify` finds them intact;
//   6. down stops every recorded process and the mount;
//   7. up again on the same state directory (on etcd without
//      --meta-backend: the etcd data there is recognised) finds the files
//      and checkpoints written before;
//   8. `ckpt verify` exits 1 naming the file after a byte of a chunk file is
//      flipped on a storage server's disk;
//   9. `ckpt gc`: aborted checkpoints, retention now, the chunks freed;
//  10. down.
// The cluster runs on etcd when etcd is installed (scripts/install-deps.sh
// installs it), else on RocksDB; RocksDB's up, down and up again is also
// tests/integration/cli_test.cc's, and every Python test's cluster is one.
// Skipped when the daemons are not built or /dev/fuse is not usable.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/crc32c.h"
#include "gtest/gtest.h"
#include "proto/etcd/rpc.grpc.pb.h"
#include "proto/meta.pb.h"
#include "tests/tools/cluster_test_support.h"
#include "tools/local_etcd.h"
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

constexpr int kChunk = 65536;
constexpr int kServers = 2;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::string data(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : data) c = static_cast<char>(rng());
  return data;
}

bool Contains(const std::string& text, const std::string& what) {
  return absl::StrContains(text, what);
}

CommandResult RunCli(std::vector<std::string> args) {
  args.insert(args.begin(), CKPTFS_CLI_PATH);
  auto result = RunCommand(args);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : CommandResult{-1, ""};
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  ASSERT_TRUE(out.good()) << path;
}

class ClusterScenarioTest : public ::testing::Test {
 protected:
  // Ports from base_: meta, storage servers, then (etcd) the second
  // metadata server and the etcd members' client and peer ports, then the
  // metrics ports (meta, storage servers, mount).
  static constexpr int kStandbyOffset = 1 + kServers;
  static constexpr int kEtcdOffset = kStandbyOffset + 1;
  static constexpr int kMetricsOffset = kEtcdOffset + 2 * kEtcdMembers;
  static constexpr int kPorts = kMetricsOffset + kServers + 2;

  void SetUp() override {
    if (!ClusterUsable()) GTEST_SKIP() << "daemons not built or /dev/fuse not usable";
    on_etcd_ = FindEtcdBinary().ok();
    char pattern[] = "/tmp/ckptfs-scenario-test-XXXXXX";
    root_ = ::mkdtemp(pattern);
    state_ = root_ + "/state";
    mnt_ = root_ + "/mnt";
    node2_ = root_ + "/node2";
    ::setenv("CKPTFS_BIN_DIR", CKPTFS_BUILD_BIN_DIR, 1);
    const auto base = FindFreePortRange("127.0.0.1", PortSearchStart(17), kPorts, {});
    ASSERT_TRUE(base.has_value());
    base_ = *base;
  }
  void TearDown() override {
    if (root_.empty()) return;
    RunCli({"down", "--state-dir", state_, "--grace-s", "2"});
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

  std::string Address(int offset) const { return absl::StrCat("127.0.0.1:", base_ + offset); }
  std::string MetaAddress() const { return Address(0); }
  // What the daemons are given as the metadata service: both servers on etcd.
  std::string MetaAddresses() const {
    return on_etcd_ ? absl::StrCat(MetaAddress(), ",", Address(kStandbyOffset)) : MetaAddress();
  }
  // `backend_flag`: whether to pass --meta-backend (up again on etcd finds
  // the backend by itself).
  CommandResult Up(std::vector<std::string> extra, bool backend_flag = true) {
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
                                     absl::StrCat(kServers),
                                     "--chunk-size",
                                     absl::StrCat(kChunk),
                                     "--metrics-port",
                                     absl::StrCat(base_ + kMetricsOffset),
                                     "--timeout-s",
                                     "60"};
    if (on_etcd_) {
      args.insert(args.end(), {"--standby-port", absl::StrCat(base_ + kStandbyOffset),
                               "--etcd-port", absl::StrCat(base_ + kEtcdOffset)});
      if (backend_flag) args.insert(args.end(), {"--meta-backend", "etcd"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args);
  }
  std::optional<ClusterState> State() {
    auto state = StateDir::Open(state_, /*create=*/false)->Load();
    if (!state.ok() || !state->has_value()) return std::nullopt;
    return **state;
  }
  static const DaemonRecord* Daemon(const ClusterState& state, const std::string& role) {
    for (const DaemonRecord& d : state.daemons) {
      if (d.role == role) return &d;
    }
    return nullptr;
  }
  static std::string Cmdline(const DaemonRecord& d) {
    return ReadWholeFile(absl::StrCat("/proc/", d.process.pid, "/cmdline"));
  }
  std::vector<std::string> ExpectedRoles(bool repair) const {
    std::vector<std::string> roles = {"meta"};
    if (on_etcd_) roles = {"etcd-0", "etcd-1", "etcd-2", "meta", "meta-standby"};
    roles.insert(roles.end(), {"storage-0", "storage-1", "fuse"});
    if (repair) roles.push_back("repair");
    return roles;
  }
  // The metrics port `up` gives a role: meta at the base, storage servers
  // next, the mount last; 0 for the others.
  int MetricsPortOf(const std::string& role) const {
    const int metrics = base_ + kMetricsOffset;
    if (role == "meta") return metrics;
    if (role == "fuse") return metrics + 1 + kServers;
    for (int i = 0; i < kServers; ++i) {
      if (role == absl::StrCat("storage-", i)) return metrics + 1 + i;
    }
    return 0;
  }

  // A committed 1-rank checkpoint run/<name> holding shard.bin = `data`.
  void MakeCheckpoint(const std::string& name, const std::string& data) {
    const std::string dir = mnt_ + "/run/" + name;
    CommandResult r = RunCli({"ckpt", "declare", dir, "1"});
    ASSERT_EQ(r.exit_status, 0) << r.output;
    ASSERT_NO_FATAL_FAILURE(WriteFile(dir + "/shard.bin", data));
    r = RunCli({"ckpt", "commit", dir, "0"});
    ASSERT_EQ(r.exit_status, 0) << r.output;
  }
  // Chunk files of inode `ino` on every storage server's disk.
  std::vector<std::string> ChunkFiles(uint64_t ino) {
    std::vector<std::string> files;
    for (int i = 0; i < kServers; ++i) {
      const std::string dir = absl::StrCat(state_, "/storage-", i, "/chunks/", ino);
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        files.push_back(e.path().string());
      }
    }
    return files;
  }
  void DownAndExpectAllStopped(const ClusterState& state) {
    CommandResult r = RunCli({"down", "--state-dir", state_});
    EXPECT_EQ(r.exit_status, 0) << r.output;
    EXPECT_FALSE(FindMount(mnt_).has_value());
    for (const DaemonRecord& d : state.daemons) {
      EXPECT_TRUE(ProcessGoneWithin(d.process.pid)) << d.role << "\n" << r.output;
    }
    EXPECT_FALSE(std::filesystem::exists(state_ + "/cluster.state"));
  }

  void UpWithEveryDaemon();
  void StatusShowsTheServers();
  void EtcdTakesOnlyTheClusterCertificate();
  void SecondMountSeesTheFirstsFiles();
  void StatusShowsMountsAndAPendingCheckpoint();
  void CheckpointsShowAndVerify();
  void UpAgainFindsTheData();
  void VerifyCatchesACorruptChunk();
  void GcReclaims();

  bool on_etcd_ = false;
  std::string root_, state_, mnt_, node2_;
  uint16_t base_ = 0;
  pid_t node2_pid_ = 0;
  ClusterState first_;                                          // the state file after the first up
  const std::string shard_ = RandomBytes(5 * kChunk + 123, 7);  // 5 chunks and a bit
  const std::string old_shard_ = RandomBytes(3 * kChunk, 11);
};

void ClusterScenarioTest::UpWithEveryDaemon() {
  CommandResult r = Up({"--orphan-grace-s", "7"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "storage-1")) << r.output;
  EXPECT_TRUE(Contains(r.output, "METRICS")) << r.output;
  EXPECT_TRUE(Contains(r.output, "ckptfs down --state-dir " + state_)) << r.output;
  ASSERT_TRUE(FindMount(mnt_).has_value());

  std::optional<ClusterState> state = State();
  ASSERT_TRUE(state.has_value());
  first_ = *state;
  EXPECT_EQ(first_.meta_address, MetaAddresses());
  std::vector<std::string> roles;
  for (const DaemonRecord& d : first_.daemons) roles.push_back(d.role);
  ASSERT_EQ(roles, ExpectedRoles(/*repair=*/true));

  for (const DaemonRecord& d : first_.daemons) {
    const std::string cmdline = Cmdline(d);
    if (d.role == "meta" || d.role == "meta-standby") {
      EXPECT_TRUE(Contains(cmdline, "--default_chunk_size=65536")) << d.role << ": " << cmdline;
      EXPECT_TRUE(Contains(cmdline, "--orphan_grace_s=7")) << d.role << ": " << cmdline;
    }
    if (on_etcd_ && (d.role == "meta" || d.role == "meta-standby")) {
      EXPECT_TRUE(Contains(cmdline, "--kv_backend=etcd")) << d.role;
      EXPECT_TRUE(Contains(cmdline, "--etcd_shared")) << d.role;
      // Both serve: each answers on its own address.
      EXPECT_TRUE(Contains(ReadWholeFile(d.log_path), "serving on")) << d.role;
    }
    if (on_etcd_ && (d.role == "storage-0" || d.role == "fuse")) {
      EXPECT_TRUE(Contains(cmdline, "--meta=" + MetaAddresses())) << d.role << ": " << cmdline;
    }
    if (d.role == "etcd-0") {
      EXPECT_TRUE(Contains(cmdline, "--max-txn-ops=100000")) << cmdline;
      EXPECT_TRUE(Contains(cmdline, "--data-dir=" + state_ + "/etcd/member-0")) << cmdline;
      EXPECT_TRUE(Contains(cmdline, "--client-cert-auth")) << cmdline;
      EXPECT_TRUE(Contains(cmdline, "--peer-client-cert-auth")) << cmdline;
    }
    if (on_etcd_ && d.role == "meta") {
      EXPECT_TRUE(Contains(cmdline, "--etcd_cert_file=" + state_ + "/etcd/tls/client.crt"))
          << cmdline;
    }
    if (d.role == "repair") {
      EXPECT_TRUE(Contains(cmdline, "--watch")) << cmdline;
    }
    // Each daemon whose build has --metrics_listen got its own port.
    if (d.metrics_address.empty()) continue;
    EXPECT_EQ(d.metrics_address, absl::StrCat("127.0.0.1:", MetricsPortOf(d.role))) << d.role;
    EXPECT_TRUE(Contains(cmdline, "--metrics_listen=" + d.metrics_address)) << d.role;
    EXPECT_TRUE(Contains(r.output, "http://" + d.metrics_address + "/metrics")) << r.output;
  }
}

// A Range of one key on the etcd member at `address` over `credentials`.
grpc::Status EtcdRange(const std::string& address,
                       const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  auto stub = etcdserverpb::KV::NewStub(grpc::CreateChannel(address, credentials));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  etcdserverpb::RangeRequest request;
  request.set_key("/");
  request.set_limit(1);
  etcdserverpb::RangeResponse response;
  return stub->Range(&context, request, &response);
}

std::string ReadPem(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void ClusterScenarioTest::EtcdTakesOnlyTheClusterCertificate() {
  if (!on_etcd_) return;
  const std::string tls = state_ + "/etcd/tls";
  struct stat st;
  ASSERT_EQ(::stat((tls + "/client.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string member = Address(kEtcdOffset);
  EXPECT_FALSE(EtcdRange(member, grpc::InsecureChannelCredentials()).ok());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadPem(tls + "/ca.crt");
  EXPECT_FALSE(EtcdRange(member, grpc::SslCredentials(ssl)).ok()) << "no client certificate";
  ssl.pem_cert_chain = ReadPem(tls + "/client.crt");
  ssl.pem_private_key = ReadPem(tls + "/client.key");
  const grpc::Status with_cert = EtcdRange(member, grpc::SslCredentials(ssl));
  EXPECT_TRUE(with_cert.ok()) << with_cert.error_message();
}

void ClusterScenarioTest::StatusShowsTheServers() {
  CommandResult r = RunCli({"status", "--state-dir", state_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "2 storage servers, 2 up")) << r.output;
  EXPECT_TRUE(Contains(r.output, Address(2))) << r.output;
}

void ClusterScenarioTest::SecondMountSeesTheFirstsFiles() {
  ASSERT_NO_FATAL_FAILURE(WriteFile(mnt_ + "/shard.bin", shard_));
  // Another node needs the cluster's credential (`up` made it).
  const std::string credential = state_ + "/credential";
  const std::string log = root_ + "/node2-fuse.log";
  CommandResult r = RunCli({"mount", "--meta", MetaAddress(), "--mountpoint", node2_,
                            "--credential-file", credential, "--log-file", log});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(ReadWholeFile(log), "mounted ckptfs")) << "the daemon logs to --log-file";
  const size_t at = r.output.find("ckptfs-fuse pid ");
  ASSERT_NE(at, std::string::npos) << r.output;
  std::string pid_text = r.output.substr(at + 16);
  pid_text = pid_text.substr(0, pid_text.find(','));
  ASSERT_TRUE(absl::SimpleAtoi(pid_text, &node2_pid_)) << r.output;
  EXPECT_TRUE(ReadWholeFile(node2_ + "/shard.bin") == shard_);
  // Mounting over a live mount is refused.
  EXPECT_EQ(RunCli({"mount", "--meta", MetaAddress(), "--mountpoint", node2_}).exit_status, 1);

  r = RunCli({"umount", "--mountpoint", node2_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_FALSE(FindMount(node2_).has_value());
  EXPECT_TRUE(ProcessGoneWithin(node2_pid_)) << "ckptfs-fuse of the second mount exits on umount";
  r = RunCli({"umount", "--mountpoint", node2_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "nothing is mounted")) << r.output;
}

void ClusterScenarioTest::StatusShowsMountsAndAPendingCheckpoint() {
  // A checkpoint of 2 ranks with one arrived: rank 0's commit waits.
  const std::string ckpt = mnt_ + "/job/step-1";
  CommandResult r = RunCli({"ckpt", "declare", ckpt, "2", "--timeout-s", "600"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  ASSERT_NO_FATAL_FAILURE(WriteFile(ckpt + "/rank0.bin", RandomBytes(1000, 1)));
  auto rank0 = std::async(std::launch::async, [&] {
    return RunCli({"ckpt", "commit", ckpt, "0"});
  });

  // The mount's heartbeat and rank 0's arrival show within a few seconds.
  // The mount heartbeats to the metadata server it uses, and each server
  // lists its own clients (two serve at once on etcd): ask each by address,
  // with the credential `up` made in the state directory.
  const std::string credential = state_ + "/credential";
  std::vector<std::string> servers = {MetaAddress()};
  if (on_etcd_) servers.push_back(Address(kStandbyOffset));
  std::string text, seen_by;
  for (int i = 0; i < 100 && seen_by.empty(); ++i) {
    for (const std::string& server : servers) {
      r = RunCli({"status", "--meta", server, "--credential-file", credential});
      text = r.output;
      if (Contains(text, mnt_) && Contains(text, "1/2 arrived")) {
        seen_by = server;
        break;
      }
    }
    if (seen_by.empty()) ::usleep(100 * 1000);
  }
  EXPECT_EQ(r.exit_status, 0) << text;
  EXPECT_TRUE(Contains(text, "ckptfs-fuse")) << text;
  EXPECT_TRUE(Contains(text, mnt_)) << text;  // the mount, by its mountpoint
  ASSERT_FALSE(seen_by.empty()) << "no metadata server lists the mount\n" << text;
  // The rest is the cluster's, whichever server answers.
  r = RunCli({"status", "--state-dir", state_});
  text = r.output;
  EXPECT_EQ(r.exit_status, 0) << text;
  EXPECT_TRUE(Contains(text, "2 storage servers, 2 up")) << text;
  EXPECT_TRUE(Contains(text, Address(2))) << text;
  EXPECT_TRUE(Contains(text, "redundancy: none (1 copy)") ||
              Contains(text, "redundancy: 2 replicas"))
      << text;
  EXPECT_TRUE(Contains(text, "pending checkpoints (1)")) << text;
  EXPECT_TRUE(Contains(text, "step-1")) << text;
  EXPECT_TRUE(Contains(text, "1/2 arrived")) << text;
  if (!on_etcd_) {
    EXPECT_TRUE(Contains(text, mnt_)) << text;  // the only server
  }

  // By address the credential must be given; without it the service
  // refuses and says what to pass.
  r = RunCli({"status", "--meta", MetaAddress()});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "--credential_file")) << r.output;
  r = RunCli({"status", "--meta", seen_by, "--json", "--credential-file", credential});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const size_t open = r.output.find('{'), close = r.output.rfind('}');
  ASSERT_TRUE(open != std::string::npos && close != std::string::npos) << r.output;
  meta::ClusterStatusReply reply;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(r.output.substr(open, close - open + 1), &reply)
          .ok())
      << r.output;
  ASSERT_EQ(reply.servers_size(), 2) << r.output;
  EXPECT_TRUE(reply.servers(0).info().alive());
  EXPECT_LT(reply.servers(0).info().id(), reply.servers(1).info().id());
  EXPECT_GT(reply.servers(0).info().capacity_bytes(), 0u);
  // Whatever `ckptfs up` asks of the service (one copy, or two replicas).
  ASSERT_TRUE(reply.copies() == 1u || reply.copies() == 2u) << r.output;
  EXPECT_EQ(reply.redundancy(), reply.copies() == 1 ? "none (1 copy)" : "2 replicas");
  EXPECT_TRUE(Contains(text, "redundancy: " + reply.redundancy())) << text;
  EXPECT_EQ(reply.service_address(), seen_by);
  const DaemonRecord* fuse = Daemon(first_, "fuse");
  ASSERT_NE(fuse, nullptr);
  bool mount_seen = false;
  for (const meta::ClientInfo& c : reply.clients()) {
    if (c.mountpoint() == mnt_) {
      mount_seen = true;
      EXPECT_EQ(c.pid(), static_cast<uint32_t>(fuse->process.pid));
      EXPECT_GT(c.last_heartbeat_ms(), 0);
      EXPECT_FALSE(c.hostname().empty());
    }
  }
  EXPECT_TRUE(mount_seen) << r.output;
  ASSERT_EQ(reply.pending_checkpoints_size(), 1) << r.output;
  EXPECT_EQ(reply.pending_checkpoints(0).name(), "step-1");
  EXPECT_EQ(reply.pending_checkpoints(0).ranks(), 2u);
  EXPECT_EQ(reply.pending_checkpoints(0).arrived(), 1u);

  // Once it commits it is no longer listed.
  r = RunCli({"ckpt", "commit", ckpt, "1"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  CommandResult r0 = rank0.get();
  EXPECT_EQ(r0.exit_status, 0) << r0.output;
  r = RunCli({"status", "--state-dir", state_});
  EXPECT_TRUE(Contains(r.output, "pending checkpoints (0)")) << r.output;
  // A down server is shown as such (the service's --server_timeout_s: 10).
  // Not waited for here: that is Membership's own test.
}

void ClusterScenarioTest::CheckpointsShowAndVerify() {
  ASSERT_NO_FATAL_FAILURE(MakeCheckpoint("step-1", old_shard_));
  ASSERT_NO_FATAL_FAILURE(MakeCheckpoint("step-2", old_shard_));
  ASSERT_NO_FATAL_FAILURE(MakeCheckpoint("step-3", shard_));
  const std::string dir = mnt_ + "/run/step-3";

  // show: size, chunk count and the CRC32C of the bytes written; the service
  // found through the mount (no --meta).
  CommandResult r = RunCli({"ckpt", "show", dir, "--chunks"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "committed, 1/1 ranks, 1 file")) << r.output;
  EXPECT_TRUE(Contains(r.output, "shard.bin")) << r.output;
  EXPECT_TRUE(Contains(r.output, absl::StrFormat("%08x", Crc32c(shard_.data(), shard_.size()))))
      << r.output;
  EXPECT_TRUE(Contains(r.output, "  chunk 5")) << r.output;
  EXPECT_FALSE(Contains(r.output, "  chunk 6")) << r.output;
  EXPECT_TRUE(Contains(r.output, absl::StrFormat("%08x", Crc32c(shard_.data(), kChunk))))
      << r.output;

  r = RunCli({"ckpt", "verify", dir});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "OK   shard.bin")) << r.output;
  EXPECT_TRUE(Contains(r.output, "all intact")) << r.output;
}

void ClusterScenarioTest::UpAgainFindsTheData() {
  // No repairer: it would rewrite the chunk the next step corrupts on purpose.
  CommandResult r = Up({"--no-repair"}, /*backend_flag=*/false);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  if (on_etcd_) {
    EXPECT_TRUE(Contains(r.output, "using --meta-backend etcd")) << r.output;
  }
  std::optional<ClusterState> state = State();
  ASSERT_TRUE(state.has_value());
  std::vector<std::string> roles;
  for (const DaemonRecord& d : state->daemons) roles.push_back(d.role);
  EXPECT_EQ(roles, ExpectedRoles(/*repair=*/false));
  EXPECT_TRUE(ReadWholeFile(mnt_ + "/shard.bin") == shard_);
  EXPECT_TRUE(ReadWholeFile(mnt_ + "/run/step-3/shard.bin") == shard_);
  r = RunCli({"ckpt", "ls", mnt_ + "/run"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  for (const char* name : {"step-1", "step-2", "step-3"}) {
    EXPECT_TRUE(Contains(r.output, name)) << name << "\n" << r.output;
  }
}

void ClusterScenarioTest::VerifyCatchesACorruptChunk() {
  const std::string dir = mnt_ + "/run/step-3";
  CommandResult r = RunCli({"ckpt", "verify", dir});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "all intact")) << r.output;

  // Flip one byte of chunk 2's data on the server's disk.
  struct stat st;
  ASSERT_EQ(::stat((dir + "/shard.bin").c_str(), &st), 0);
  std::string chunk2;
  for (const std::string& f : ChunkFiles(st.st_ino)) {
    if (std::filesystem::path(f).filename() == "2") chunk2 = f;
  }
  ASSERT_FALSE(chunk2.empty()) << "no chunk file 2 of inode " << st.st_ino;
  {
    std::fstream io(chunk2, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(4096 + 100);
    char c = 0;
    io.read(&c, 1);
    io.seekp(4096 + 100);
    c = static_cast<char>(c ^ 0x5a);
    io.write(&c, 1);
    ASSERT_TRUE(io.good());
  }
  r = RunCli({"ckpt", "verify", dir, "--state-dir", state_});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "BAD  shard.bin")) << r.output;
  EXPECT_TRUE(Contains(r.output, "chunk 2 on storage server")) << r.output;
  EXPECT_TRUE(Contains(r.output, "1 file BAD (1 chunk)")) << r.output;
  EXPECT_TRUE(Contains(r.output, "is damaged: shard.bin")) << r.output;
  // The other checkpoints are intact.
  r = RunCli({"ckpt", "verify", mnt_ + "/run/step-1"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
}

void ClusterScenarioTest::GcReclaims() {
  // An aborted checkpoint: 2 ranks, 1 s barrier, one rank commits.
  CommandResult r = RunCli({"ckpt", "declare", mnt_ + "/run/step-4", "2", "--timeout-s", "1"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  r = RunCli({"ckpt", "commit", mnt_ + "/run/step-4", "0"});
  ASSERT_EQ(r.exit_status, 1) << r.output;

  struct stat st;
  ASSERT_EQ(::stat((mnt_ + "/run/step-1/shard.bin").c_str(), &st), 0);
  const uint64_t step1_ino = st.st_ino;
  ASSERT_FALSE(ChunkFiles(step1_ino).empty());

  // Without retention: only the aborted one goes (after --grace-s).
  r = RunCli({"ckpt", "gc", mnt_ + "/run", "--dry-run", "--grace-s", "0"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "would remove 1 checkpoint")) << r.output;
  EXPECT_TRUE(Contains(r.output, "no retention set")) << r.output;
  r = RunCli({"ckpt", "gc", mnt_ + "/run", "--keep", "1", "--grace-s", "0"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "removed 3 checkpoints")) << r.output;
  EXPECT_TRUE(Contains(r.output, "step-4")) << r.output;
  r = RunCli({"ckpt", "ls", mnt_ + "/run", "--all"});
  EXPECT_TRUE(Contains(r.output, "step-3")) << r.output;
  EXPECT_FALSE(Contains(r.output, "step-1")) << r.output;
  EXPECT_FALSE(Contains(r.output, "step-2")) << r.output;
  EXPECT_FALSE(Contains(r.output, "step-4")) << r.output;
  // step-1's chunks leave the servers' disks (the reclaimer is woken).
  for (int i = 0; i < 300 && !ChunkFiles(step1_ino).empty(); ++i) ::usleep(100 * 1000);
  EXPECT_TRUE(ChunkFiles(step1_ino).empty());
  r = RunCli({"ckpt", "gc", mnt_ + "/run", "--keep", "1"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "nothing to reclaim")) << r.output;
}

TEST_F(ClusterScenarioTest, UpOperateDownAndUpAgain) {
  SCOPED_TRACE(on_etcd_ ? "on etcd" : "on RocksDB (etcd is not installed)");
  {
    SCOPED_TRACE("step 1: up");
    ASSERT_NO_FATAL_FAILURE(UpWithEveryDaemon());
    ASSERT_NO_FATAL_FAILURE(EtcdTakesOnlyTheClusterCertificate());
  }
  {
    SCOPED_TRACE("step 2: status");
    ASSERT_NO_FATAL_FAILURE(StatusShowsTheServers());
  }
  {
    SCOPED_TRACE("step 3: a second mount");
    ASSERT_NO_FATAL_FAILURE(SecondMountSeesTheFirstsFiles());
  }
  {
    SCOPED_TRACE("step 4: status of mounts and a pending checkpoint");
    ASSERT_NO_FATAL_FAILURE(StatusShowsMountsAndAPendingCheckpoint());
  }
  {
    SCOPED_TRACE("step 5: ckpt show and verify");
    ASSERT_NO_FATAL_FAILURE(CheckpointsShowAndVerify());
  }
  {
    SCOPED_TRACE("step 6: down");
    ASSERT_NO_FATAL_FAILURE(DownAndExpectAllStopped(first_));
  }
  {
    SCOPED_TRACE("step 7: up again");
    ASSERT_NO_FATAL_FAILURE(UpAgainFindsTheData());
  }
  {
    SCOPED_TRACE("step 8: ckpt verify of a corrupt chunk");
    ASSERT_NO_FATAL_FAILURE(VerifyCatchesACorruptChunk());
  }
  {
    SCOPED_TRACE("step 9: ckpt gc");
    ASSERT_NO_FATAL_FAILURE(GcReclaims());
  }
  {
    SCOPED_TRACE("step 10: down again");
    std::optional<ClusterState> state = State();
    ASSERT_TRUE(state.has_value());
    ASSERT_NO_FATAL_FAILURE(DownAndExpectAllStopped(*state));
  }
}

}  // namespace
}  // namespace ckptfs::tools
