// The operator commands against the real daemons of this build: `ckptfs
// status` (text and --json, parsed back into the reply message) with its
// servers, clients and a pending checkpoint's ranks; `ckptfs ckpt show`
// (CRC32C equal to that of the bytes written), `verify` (exit 1 naming the
// file after a byte of a chunk file is flipped on a storage server's disk),
// `gc` (retention now, aborted checkpoints, chunks freed); `up`'s metrics
// ports and --orphan-grace-s; the help texts. Cluster tests are skipped when
// the daemons are not built or /dev/fuse is not usable.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/crc32c.h"
#include "gtest/gtest.h"
#include "proto/meta.pb.h"
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
using testing::ReadWholeFile;

constexpr int kChunk = 65536;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::string data(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : data) c = static_cast<char>(rng());
  return data;
}

bool Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

CommandResult RunCli(std::vector<std::string> args) {
  args.insert(args.begin(), CKPTFS_CLI_PATH);
  auto result = RunCommand(args);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : CommandResult{-1, ""};
}

class OpsClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ClusterUsable()) GTEST_SKIP() << "daemons not built or /dev/fuse not usable";
    char pattern[] = "/tmp/ckptfs-ops-test-XXXXXX";
    root_ = ::mkdtemp(pattern);
    state_ = root_ + "/state";
    mnt_ = root_ + "/mnt";
    ::setenv("CKPTFS_BIN_DIR", CKPTFS_BUILD_BIN_DIR, 1);
    // meta, 2 storage servers, then 4 metrics ports.
    const auto base = FindFreePortRange("127.0.0.1", PortSearchStart(17), 7, {});
    ASSERT_TRUE(base.has_value());
    base_ = *base;
  }
  void TearDown() override {
    if (root_.empty()) return;
    RunCli({"down", "--state-dir", state_, "--grace-s", "2"});
    if (std::optional<MountEntry> e = FindMount(mnt_); e && e->is_fuse()) {
      (void)FuseUnmount(mnt_, /*lazy=*/true);
    }
    ::unsetenv("CKPTFS_BIN_DIR");
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  CommandResult Up(std::vector<std::string> extra = {}) {
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
                                     "--chunk-size",
                                     absl::StrCat(kChunk),
                                     "--metrics-port",
                                     absl::StrCat(base_ + 3)};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args);
  }

  void WriteFile(const std::string& path, const std::string& data) {
    std::ofstream out(path, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    ASSERT_TRUE(out.good()) << path;
  }

  // A committed 1-rank checkpoint run/<name> holding shard.bin = `data`.
  void MakeCheckpoint(const std::string& name, const std::string& data) {
    const std::string dir = mnt_ + "/run/" + name;
    CommandResult r = RunCli({"ckpt", "declare", dir, "1"});
    ASSERT_EQ(r.exit_status, 0) << r.output;
    WriteFile(dir + "/shard.bin", data);
    r = RunCli({"ckpt", "commit", dir, "0"});
    ASSERT_EQ(r.exit_status, 0) << r.output;
  }

  // Chunk files of inode `ino` on every storage server's disk.
  std::vector<std::string> ChunkFiles(uint64_t ino) {
    std::vector<std::string> files;
    for (int i = 0; i < 2; ++i) {
      const std::string dir = absl::StrCat(state_, "/storage-", i, "/chunks/", ino);
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        files.push_back(e.path().string());
      }
    }
    return files;
  }

  std::string root_, state_, mnt_;
  uint16_t base_ = 0;
};

TEST_F(OpsClusterTest, StatusShowsServersClientsAndPendingCheckpoint) {
  CommandResult r = Up({"--orphan-grace-s", "7"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "METRICS")) << r.output;

  auto state = StateDir::Open(state_, /*create=*/false)->Load();
  ASSERT_TRUE(state.ok() && state->has_value());
  ASSERT_EQ((*state)->daemons.size(), 5u);  // meta, 2 storage, fuse, repair
  EXPECT_EQ((*state)->daemons[4].role, "repair");
  EXPECT_TRUE(
      Contains(ReadWholeFile(absl::StrCat("/proc/", (*state)->daemons[4].process.pid, "/cmdline")),
               std::string("--watch")));
  EXPECT_TRUE(
      Contains(ReadWholeFile(absl::StrCat("/proc/", (*state)->daemons[0].process.pid, "/cmdline")),
               std::string("--orphan_grace_s=7")));
  // Metrics ports: each daemon whose build has --metrics_listen got its own,
  // meta at the base, storage servers next, the mount last.
  for (size_t i = 0; i < (*state)->daemons.size(); ++i) {
    const DaemonRecord& d = (*state)->daemons[i];
    if (d.metrics_address.empty()) continue;
    EXPECT_EQ(d.metrics_address, absl::StrCat("127.0.0.1:", base_ + 3 + i)) << d.role;
    EXPECT_TRUE(Contains(ReadWholeFile(absl::StrCat("/proc/", d.process.pid, "/cmdline")),
                         "--metrics_listen=" + d.metrics_address))
        << d.role;
    EXPECT_TRUE(Contains(r.output, "http://" + d.metrics_address + "/metrics")) << r.output;
  }

  // A checkpoint of 2 ranks with one arrived: rank 0's commit waits.
  const std::string ckpt = mnt_ + "/run/step-1";
  r = RunCli({"ckpt", "declare", ckpt, "2", "--timeout-s", "600"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  WriteFile(ckpt + "/rank0.bin", RandomBytes(1000, 1));
  auto rank0 = std::async(std::launch::async, [&] {
    return RunCli({"ckpt", "commit", ckpt, "0"});
  });

  // The mount's heartbeat and rank 0's arrival show within a few seconds.
  std::string text;
  for (int i = 0; i < 100; ++i) {
    r = RunCli({"status", "--state-dir", state_});
    text = r.output;
    if (Contains(text, mnt_) && Contains(text, "1/2 arrived")) break;
    ::usleep(100 * 1000);
  }
  EXPECT_EQ(r.exit_status, 0) << text;
  EXPECT_TRUE(Contains(text, "2 storage servers, 2 up")) << text;
  EXPECT_TRUE(Contains(text, absl::StrCat("127.0.0.1:", base_ + 2))) << text;
  EXPECT_TRUE(Contains(text, "redundancy: none (1 copy)") ||
              Contains(text, "redundancy: 2 replicas"))
      << text;
  EXPECT_TRUE(Contains(text, "ckptfs-fuse")) << text;
  EXPECT_TRUE(Contains(text, mnt_)) << text;  // the mount, by its mountpoint
  EXPECT_TRUE(Contains(text, "pending checkpoints (1)")) << text;
  EXPECT_TRUE(Contains(text, "step-1")) << text;
  EXPECT_TRUE(Contains(text, "1/2 arrived")) << text;

  // By address the credential must be given (`up` made it in the state dir);
  // without it the service refuses and says what to pass.
  r = RunCli({"status", "--meta", absl::StrCat("127.0.0.1:", base_)});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "--credential_file")) << r.output;
  r = RunCli({"status", "--meta", absl::StrCat("127.0.0.1:", base_), "--json", "--credential-file",
              state_ + "/credential"});
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
  EXPECT_EQ(reply.service_address(), absl::StrCat("127.0.0.1:", base_));
  bool mount_seen = false;
  for (const meta::ClientInfo& c : reply.clients()) {
    if (c.mountpoint() == mnt_) {
      mount_seen = true;
      EXPECT_EQ(c.pid(), static_cast<uint32_t>((*state)->daemons[3].process.pid));
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

TEST_F(OpsClusterTest, CkptShowVerifyCatchesCorruptChunkAndGcReclaims) {
  // No repairer: it would rewrite the chunk this test corrupts on purpose.
  CommandResult r = Up({"--no-repair"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  // 5 chunks and a bit: both servers hold some.
  const std::string old_data = RandomBytes(3 * kChunk, 11);
  const std::string data = RandomBytes(5 * kChunk + 123, 7);
  ASSERT_NO_FATAL_FAILURE(MakeCheckpoint("step-1", old_data));
  ASSERT_NO_FATAL_FAILURE(MakeCheckpoint("step-2", old_data));
  ASSERT_NO_FATAL_FAILURE(MakeCheckpoint("step-3", data));
  const std::string dir = mnt_ + "/run/step-3";
  const std::string crc = absl::StrFormat("%08x", Crc32c(data.data(), data.size()));

  // show: size, chunk count and the CRC32C of the bytes written; the service
  // found through the mount (no --meta).
  r = RunCli({"ckpt", "show", dir, "--chunks"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "committed, 1/1 ranks, 1 file")) << r.output;
  EXPECT_TRUE(Contains(r.output, "shard.bin")) << r.output;
  EXPECT_TRUE(Contains(r.output, crc)) << r.output;
  EXPECT_TRUE(Contains(r.output, "  chunk 5")) << r.output;
  EXPECT_FALSE(Contains(r.output, "  chunk 6")) << r.output;
  const std::string chunk0_crc = absl::StrFormat("%08x", Crc32c(data.data(), kChunk));
  EXPECT_TRUE(Contains(r.output, chunk0_crc)) << r.output;

  r = RunCli({"ckpt", "verify", dir});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "OK   shard.bin")) << r.output;
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

  // An aborted checkpoint: 2 ranks, 1 s barrier, one rank commits.
  r = RunCli({"ckpt", "declare", mnt_ + "/run/step-4", "2", "--timeout-s", "1"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  r = RunCli({"ckpt", "commit", mnt_ + "/run/step-4", "0"});
  ASSERT_EQ(r.exit_status, 1) << r.output;

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

TEST(OpsHelpTest, HelpDescribesTheCommands) {
  CommandResult r = RunCli({"help"});
  EXPECT_EQ(r.exit_status, 0);
  for (const char* name : {"ckpt show", "ckpt verify", "ckpt gc", "ckpt ls", "ckpt rm", "status"}) {
    EXPECT_TRUE(Contains(r.output, name)) << name << "\n" << r.output;
  }
  r = RunCli({"ckpt", "verify", "--help"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_TRUE(Contains(r.output, "CRC32C")) << r.output;
  r = RunCli({"ckpt", "gc", "--help"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_TRUE(Contains(r.output, "--keep")) << r.output;
  r = RunCli({"status", "--help"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_TRUE(Contains(r.output, "--json")) << r.output;
  r = RunCli({"up", "--help"});
  EXPECT_TRUE(Contains(r.output, "--metrics-port")) << r.output;
  EXPECT_TRUE(Contains(r.output, "--orphan-grace-s")) << r.output;
  // verify without a service to reach: exit 1 with what to pass.
  r = RunCli({"ckpt", "verify", "/"});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "not on a ckptfs mount")) << r.output;
}

}  // namespace
}  // namespace ckptfs::tools
