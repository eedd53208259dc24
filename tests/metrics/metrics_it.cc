// Integration test of the metrics endpoints: a real ckptfs-meta, a
// ckptfs-storage and a ckptfs-fuse mount, each with --metrics_listen; a file
// is written and read through the mount, then all three endpoints are
// scraped over HTTP, parsed strictly (exposition_parser.h), and their
// counters must have moved by at least the bytes moved. Also: a busy
// metrics port fails a daemon's start-up with a message naming the flag;
// and the mount's chunk-read counter shows what a load fetches from the
// servers: a file that ranks read together once, a file read again after
// its first reader closed twice, and nothing more after that.
//
// The storage server is started here rather than by LocalCluster, which has
// no per-storage flags; it registers with the cluster's metadata server.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "tests/integration/child_process.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"
#include "tests/metrics/exposition_parser.h"

namespace ckptfs::testing {
namespace {

// GET /metrics on 127.0.0.1:`port`; the body of a 200 reply.
absl::StatusOr<std::string> Scrape(uint16_t port) {
  absl::StatusOr<UniqueFd> fd = ConnectTcp(HostPort{"127.0.0.1", port}, absl::Seconds(10));
  if (!fd.ok()) return fd.status();
  if (absl::Status s = SetSocketTimeouts(fd->get(), absl::Seconds(30)); !s.ok()) return s;
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
  if (absl::Status s = SendAll(fd->get(), request.data(), request.size()); !s.ok()) return s;
  std::string all;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::recv(fd->get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  if (!absl::StartsWith(all, "HTTP/1.1 200 ")) {
    return absl::InternalError(
        absl::StrCat("scrape of port ", port, " answered: ", all.substr(0, 200)));
  }
  const size_t end = all.find("\r\n\r\n");
  if (end == std::string::npos) return absl::InternalError("no end of the response head");
  return all.substr(end + 4);
}

absl::StatusOr<Exposition> ScrapeAndParse(uint16_t port) {
  absl::StatusOr<std::string> body = Scrape(port);
  if (!body.ok()) return body.status();
  return ParseExposition(*body);
}

double Value(const Exposition& e, const std::string& name,
             const std::map<std::string, std::string>& labels = {}) {
  const Sample* s = e.Find(name, labels);
  return s == nullptr ? -1 : s->value;
}

class MetricsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0) {
      GTEST_SKIP() << "needs root and /dev/fuse";
    }
  }

  uint16_t FreePort() {
    absl::StatusOr<uint16_t> port = PickFreePort();
    EXPECT_TRUE(port.ok()) << port.status();
    return port.ok() ? *port : 0;
  }
};

TEST_F(MetricsIntegrationTest, EveryDaemonServesMetricsThatCountTheBytesMoved) {
  const uint16_t meta_metrics = FreePort();
  const uint16_t storage_metrics = FreePort();
  const uint16_t fuse_metrics = FreePort();
  const uint16_t storage_port = FreePort();
  LocalClusterOptions options;
  options.storage_servers = 0;
  options.meta_flags = {MetricsListenFlag(meta_metrics)};
  auto cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  LocalCluster& c = **cluster;

  const std::string storage_dir = absl::StrCat(c.root(), "/metrics-storage");
  ASSERT_EQ(::mkdir(storage_dir.c_str(), 0755), 0);
  auto storage = ChildProcess::Start(
      {BinDir() + "/ckptfs-storage", absl::StrCat("--listen=127.0.0.1:", storage_port),
       "--data_dir=" + storage_dir, "--meta=" + c.meta_address(), "--heartbeat_interval_s=1",
       "--buffer_pool_mb=65", "--credential_file=" + c.credential_file(),
       "--server_credential_file=" + c.server_credential_file(),
       MetricsListenFlag(storage_metrics)},
      absl::StrCat(c.root(), "/metrics-storage.log"));
  ASSERT_TRUE(storage.ok()) << storage.status();
  ASSERT_TRUE(c.WaitServersAlive(1).ok()) << (*storage)->LogTail();

  auto mnt = c.Mount("mnt", {MetricsListenFlag(fuse_metrics)});
  ASSERT_TRUE(mnt.ok()) << mnt.status() << "\n" << c.DescribeLogs();

  // 3 chunks and a bit (the default chunk is 4 MiB).
  const size_t size = (12u << 20) + 4097;
  const std::string data = TestData(size, 7);
  const std::string path = *mnt + "/payload.bin";
  ASSERT_TRUE(WriteWholeFile(path, data).ok());
  auto back = ReadWholeFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(*back == data);
  // A lookup of a missing name: an error reply counted by errno.
  struct stat st;
  ASSERT_NE(::stat((*mnt + "/missing").c_str(), &st), 0);

  // ckptfs-storage.
  auto s = ScrapeAndParse(storage_metrics);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GE(Value(*s, "ckptfs_storage_write_bytes_total"), size);
  EXPECT_GE(Value(*s, "ckptfs_storage_requests_total", {{"op", "WRITE"}}), 4);
  EXPECT_GE(Value(*s, "ckptfs_storage_request_duration_seconds_count", {{"op", "WRITE"}}), 4);
  EXPECT_EQ(Value(*s, "ckptfs_storage_buffer_pool_capacity_bytes"), 65 << 20);
  EXPECT_GE(Value(*s, "ckptfs_storage_buffer_pool_used_bytes"), 0);
  EXPECT_GT(Value(*s, "ckptfs_storage_disk_capacity_bytes"), 0);
  EXPECT_GT(Value(*s, "ckptfs_storage_disk_free_bytes"), 0);
  EXPECT_GE(Value(*s, "ckptfs_storage_requests_in_flight"), 0);
  EXPECT_EQ(s->types.at("ckptfs_storage_request_duration_seconds"), "histogram");

  // ckptfs-fuse (with libckptfs's chunk requests).
  auto f = ScrapeAndParse(fuse_metrics);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GE(Value(*f, "ckptfs_fuse_write_bytes_total"), size);
  EXPECT_GE(Value(*f, "ckptfs_fuse_read_bytes_total"), size);
  EXPECT_GT(Value(*f, "ckptfs_fuse_operations_total", {{"op", "write"}}), 0);
  EXPECT_GT(Value(*f, "ckptfs_fuse_operations_total", {{"op", "create"}}), 0);
  EXPECT_GT(Value(*f, "ckptfs_fuse_operation_duration_seconds_count", {{"op", "write"}}), 0);
  EXPECT_GE(Value(*f, "ckptfs_fuse_errors_total", {{"errno", "ENOENT"}}), 1);
  EXPECT_GE(Value(*f, "ckptfs_client_chunk_write_bytes_total"), size);
  EXPECT_GE(Value(*f, "ckptfs_client_chunk_requests_total", {{"op", "WRITE"}}), 4);
  EXPECT_EQ(Value(*f, "ckptfs_client_write_buffer_limit_bytes"), 2048.0 * (1 << 20));
  EXPECT_GE(Value(*f, "ckptfs_client_write_buffer_used_bytes"), 0);

  // ckptfs-meta.
  auto m = ScrapeAndParse(meta_metrics);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->Sum("ckptfs_meta_rpcs_total"), 0);
  EXPECT_GE(Value(*m, "ckptfs_meta_rpcs_total", {{"method", "RegisterServer"}}), 1);
  EXPECT_GE(Value(*m, "ckptfs_meta_rpcs_total", {{"method", "Create"}}), 1);
  EXPECT_GE(Value(*m, "ckptfs_meta_rpcs_total", {{"method", "CommitWrite"}}), 1);
  EXPECT_GE(Value(*m, "ckptfs_meta_rpc_duration_seconds_count", {{"method", "Create"}}), 1);
  EXPECT_EQ(Value(*m, "ckptfs_meta_storage_servers", {{"state", "alive"}}), 1);
  EXPECT_GT(Value(*m, "ckptfs_meta_storage_capacity_bytes"), 0);
  EXPECT_GE(Value(*m, "ckptfs_meta_rpc_errors_total", {{"code", "NOT_FOUND"}}), 1);  // the stat
  EXPECT_EQ(Value(*m, "ckptfs_meta_checkpoint_barriers_open"), 0);
  EXPECT_EQ(Value(*m, "ckptfs_meta_checkpoints_committed_total"), 0);
  EXPECT_EQ(m->types.at("ckptfs_meta_checkpoint_commit_seconds"), "histogram");

  // Counters only grow between scrapes.
  ASSERT_TRUE(WriteWholeFile(*mnt + "/second.bin", data.substr(0, 1 << 20)).ok());
  auto s2 = ScrapeAndParse(storage_metrics);
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_GE(Value(*s2, "ckptfs_storage_write_bytes_total"),
            Value(*s, "ckptfs_storage_write_bytes_total") + (1 << 20));
  ASSERT_TRUE(c.Unmount(*mnt).ok());
}

TEST_F(MetricsIntegrationTest, BusyMetricsPortFailsStartUpNamingTheFlag) {
  absl::StatusOr<UniqueFd> taken = ListenTcp(HostPort{"127.0.0.1", 0}, 1);
  ASSERT_TRUE(taken.ok());
  const uint16_t busy = *LocalPort(taken->get());
  auto dir = MakeTempDir("ckptfs-metrics-busy-");
  ASSERT_TRUE(dir.ok());
  for (const std::string daemon : {"ckptfs-meta", "ckptfs-storage"}) {
    SCOPED_TRACE(daemon);
    const std::string data_dir = absl::StrCat(*dir, "/", daemon);
    auto child = ChildProcess::Start(
        {BinDir() + "/" + daemon, absl::StrCat("--listen=127.0.0.1:", FreePort()),
         "--data_dir=" + data_dir, MetricsListenFlag(busy)},
        absl::StrCat(*dir, "/", daemon, ".log"));
    ASSERT_TRUE(child.ok());
    std::optional<int> status = (*child)->Wait(absl::Seconds(60));
    ASSERT_TRUE(status.has_value()) << "still running";
    ASSERT_TRUE(WIFEXITED(*status));
    EXPECT_EQ(WEXITSTATUS(*status), 2);
    const std::string log = (*child)->LogTail();
    EXPECT_TRUE(absl::StrContains(log, "--metrics_listen")) << log;
    EXPECT_TRUE(absl::StrContains(log, absl::StrCat(busy))) << log;
    EXPECT_TRUE(absl::StrContains(log, "already in use")) << log;
  }
  RemoveTree(*dir);
}

// The first read-only open of a file bypasses the page cache, the later
// ones share it (the mount's --direct_io_reads, on by default): ranks that
// open one shard together share the mount's read cache, so the shard is
// fetched once; a reader that comes after the first closed fills the page
// cache with a second fetch, and every later reader finds it there.
TEST_F(MetricsIntegrationTest, AShardReadByManyRanksIsFetchedOnceWhenTheyReadTogether) {
  const uint16_t fuse_metrics = FreePort();
  auto cluster = LocalCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto mnt = (*cluster)->Mount("mnt", {MetricsListenFlag(fuse_metrics)});
  ASSERT_TRUE(mnt.ok()) << mnt.status() << "\n" << (*cluster)->DescribeLogs();
  auto fetched = [&] {
    auto f = ScrapeAndParse(fuse_metrics);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? Value(*f, "ckptfs_client_chunk_read_bytes_total") : -1;
  };
  auto read_all = [](int fd, std::string* out) {
    char buf[1 << 20];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd, buf, sizeof(buf), at);
      if (n <= 0) return;
      out->append(buf, static_cast<size_t>(n));
      at += n;
    }
  };
  const size_t size = (12u << 20) + 4097;  // 4 chunks of the default 4 MiB
  const std::string data = TestData(size, 3);

  // Four ranks open the shard, then all read it at once.
  const std::string shared = *mnt + "/shared.pt";
  ASSERT_TRUE(WriteWholeFile(shared, data).ok());
  const double before = fetched();
  std::vector<int> fds;
  for (int rank = 0; rank < 4; ++rank) {
    fds.push_back(::open(shared.c_str(), O_RDONLY));
    ASSERT_GE(fds.back(), 0) << std::strerror(errno);
  }
  std::vector<std::string> seen(fds.size());
  std::vector<std::thread> ranks;
  for (size_t i = 0; i < fds.size(); ++i) ranks.emplace_back(read_all, fds[i], &seen[i]);
  for (std::thread& t : ranks) t.join();
  for (size_t i = 0; i < fds.size(); ++i) {
    EXPECT_TRUE(seen[i] == data) << "rank " << i << " read " << seen[i].size() << " bytes";
    ::close(fds[i]);
  }
  const double together = fetched() - before;
  EXPECT_GE(together, size);
  EXPECT_LT(together, 1.5 * size) << "four ranks reading together fetched it more than once";

  // Ranks one after another: the first reads it directly, the second into
  // the page cache, the rest from there.
  const std::string staggered = *mnt + "/staggered.pt";
  ASSERT_TRUE(WriteWholeFile(staggered, data).ok());
  double last = fetched();
  std::vector<double> per_reader;
  for (int rank = 0; rank < 4; ++rank) {
    const int fd = ::open(staggered.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    std::string got;
    read_all(fd, &got);
    ::close(fd);
    EXPECT_TRUE(got == data) << "rank " << rank << " read " << got.size() << " bytes";
    const double now = fetched();
    per_reader.push_back(now - last);
    last = now;
  }
  EXPECT_GE(per_reader[0], size);
  EXPECT_LT(per_reader[2] + per_reader[3], size / 2.0)
      << "readers after the second fetched it again: " << per_reader[2] << " and " << per_reader[3]
      << " bytes";
}

}  // namespace
}  // namespace ckptfs::testing
