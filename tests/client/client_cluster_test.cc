// libckptfs against real processes: one ckptfs-meta and three
// ckptfs-storage on loopback (tests/integration's LocalCluster), no FUSE.
// Files are read back twice: in place from the chunk files, as a Client on
// the servers' host does, and over TCP, as a remote one does.
// Checks what the fakes cannot: the storage server's WRITE merge/replace,
// READ short/ENOENT and TRIM semantics match what the client relies on,
// close-to-open across two Clients, a dead server surfacing in Close with
// a message that says what to do, and each Client announcing itself to the
// service (ClientHeartbeat, listed by ClusterStatus).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "client/client.h"
#include "client/file.h"
#include "client/grpc_meta_client.h"
#include "common/errno_status.h"
#include "common/metrics/metrics.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"

namespace ckptfs::client {
namespace {

constexpr uint32_t kChunk = 64 * 1024;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

::testing::AssertionResult SameBytes(const std::string& got, const std::string& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return ::testing::AssertionFailure() << "got " << got.size() << " bytes, want " << want.size()
                                       << "; first difference at byte " << i;
}

class ClientClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ckptfs::testing::LocalClusterOptions options;
    options.storage_servers = 3;
    auto cluster = ckptfs::testing::LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    writer_ = Connect();
    reader_ = Connect();
    tcp_reader_ = Connect(/*local_reads=*/false);
    ASSERT_NE(writer_, nullptr);
    ASSERT_NE(reader_, nullptr);
    ASSERT_NE(tcp_reader_, nullptr);
    auto dir = writer_->MkdirAll("/small", 0755);
    ASSERT_TRUE(dir.ok()) << dir.status();
    ASSERT_TRUE(
        writer_->SetXattr(dir->ino(), "user.ckptfs.chunk_size", std::to_string(kChunk), 0).ok());
    dir_ = dir->ino();
  }

  void TearDown() override {
    writer_.reset();
    reader_.reset();
    tcp_reader_.reset();
    if (HasFailure() && cluster_ != nullptr) std::cerr << cluster_->DescribeLogs();
    cluster_.reset();  // stops every process
  }

  // The servers run on this host: these Clients read their chunk files in
  // place (client/local_chunk_transport.h, off by default in ClientOptions)
  // unless `local_reads` is false, reading over TCP like a remote node;
  // they write over TCP unless `local_writes`.
  std::unique_ptr<Client> Connect(bool local_reads = true, bool local_writes = false) {
    ClientOptions options;
    options.meta_address = cluster_->meta_address();
    options.local_reads = local_reads;
    options.local_writes = local_writes;
    options.rpc_timeout = absl::Seconds(10);
    options.data_timeout = absl::Seconds(10);
    options.io_threads = 8;
    auto client = Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  static std::string ReadAll(Client& client, uint64_t ino) {
    auto file = client.Open(ino, O_RDONLY);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return "<open failed>";
    std::string out((*file)->size(), '\0');
    size_t done = 0;
    while (done < out.size()) {
      auto n = (*file)->Read(done, out.data() + done, std::min<size_t>(out.size() - done, 100000));
      EXPECT_TRUE(n.ok()) << n.status();
      if (!n.ok() || *n == 0) break;
      done += *n;
    }
    out.resize(done);
    EXPECT_TRUE((*file)->Close().ok());
    return out;
  }

  std::unique_ptr<ckptfs::testing::LocalCluster> cluster_;
  std::unique_ptr<Client> writer_;
  std::unique_ptr<Client> reader_;      // reads chunk files in place
  std::unique_ptr<Client> tcp_reader_;  // reads over TCP
  uint64_t dir_ = 0;
};

TEST_F(ClientClusterTest, SizesAtChunkEdgesCloseToOpen) {
  const uint64_t sizes[] = {
      0, 1, kChunk - 1, kChunk, kChunk + 1, 3ull * kChunk + 17, (5ull << 20) + 3};
  int i = 0;
  for (uint64_t size : sizes) {
    SCOPED_TRACE(size);
    const std::string data = RandomBytes(size, i);
    auto created =
        writer_->Create(dir_, "f" + std::to_string(i++), 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC);
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_EQ(created->attr.layout().chunk_size(), kChunk);
    for (size_t done = 0; done < data.size();) {
      const size_t n = std::min<size_t>(50001, data.size() - done);
      ASSERT_TRUE(created->file->Write(done, data.data() + done, n).ok());
      done += n;
    }
    const uint64_t ino = created->file->ino();
    ASSERT_TRUE(created->file->Close().ok());
    auto attr = reader_->GetAttr(ino);  // another client
    ASSERT_TRUE(attr.ok());
    EXPECT_EQ(attr->size(), size);
    EXPECT_TRUE(SameBytes(ReadAll(*reader_, ino), data));
    EXPECT_TRUE(SameBytes(ReadAll(*tcp_reader_, ino), data));
  }
}

// Hard links and special files through libckptfs, on 1 copy, 2 copies and
// an erasure code 2+1: a file written under one name is read whole under
// another by a second Client, and keeps its data when the first name goes.
TEST_F(ClientClusterTest, HardLinksAndSpecialFilesOnEveryRedundancy) {
  const std::pair<const char*, const char*> redundancies[] = {
      {"", ""}, {"user.ckptfs.replicas", "2"}, {"user.ckptfs.ec", "2+1"}};
  int i = 0;
  for (const auto& [xattr, value] : redundancies) {
    SCOPED_TRACE(xattr);
    auto dir = writer_->Mkdir(dir_, "r" + std::to_string(i), 0755, 0, 0);
    ASSERT_TRUE(dir.ok()) << dir.status();
    if (*xattr != '\0') {
      ASSERT_TRUE(writer_->SetXattr(dir->ino(), xattr, value, 0).ok());
    }
    const std::string data = RandomBytes(3 * kChunk + 5, 100 + i++);
    auto created = writer_->Create(dir->ino(), "a", 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC);
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE(created->file->Write(0, data.data(), data.size()).ok());
    const uint64_t ino = created->file->ino();
    ASSERT_TRUE(created->file->Close().ok());

    auto linked = writer_->Link(ino, dir->ino(), "b");
    ASSERT_TRUE(linked.ok()) << linked.status();
    EXPECT_EQ(linked->nlink(), 2u);
    EXPECT_EQ(ErrnoFromStatus(writer_->Link(ino, dir->ino(), "b").status()), EEXIST);
    EXPECT_EQ(ErrnoFromStatus(writer_->Link(dir->ino(), dir_, "dirlink").status()), EPERM);
    ASSERT_TRUE(writer_->Unlink(dir->ino(), "a").ok());
    auto by_b = reader_->Lookup(dir->ino(), "b");
    ASSERT_TRUE(by_b.ok()) << by_b.status();
    EXPECT_EQ(by_b->ino(), ino);
    EXPECT_EQ(by_b->nlink(), 1u);
    EXPECT_TRUE(SameBytes(ReadAll(*reader_, ino), data));
    EXPECT_TRUE(SameBytes(ReadAll(*tcp_reader_, ino), data));

    auto fifo = writer_->Mknod(dir->ino(), "fifo", S_IFIFO | 0640, 0, 1000, 1000);
    ASSERT_TRUE(fifo.ok()) << fifo.status();
    EXPECT_EQ(fifo->type(), meta::FIFO);
    auto device = writer_->Mknod(dir->ino(), "null", S_IFCHR | 0666, makedev(1, 3), 0, 0);
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(reader_->Lookup(dir->ino(), "null")->rdev(), makedev(1, 3));
    EXPECT_EQ(ErrnoFromStatus(writer_->Mknod(dir->ino(), "reg", S_IFREG | 0644, 0, 0, 0).status()),
              EINVAL);
    // A special file has no data to open.
    EXPECT_FALSE(reader_->Open(fifo->ino(), O_RDONLY).ok());
  }
}

// The cluster's storage servers run on this host, so a Client with
// local_reads reads their chunk files in place (client/local_chunk_transport.h)
// and one without reads over TCP; both read the same bytes.
TEST_F(ClientClusterTest, ChunksOfServersOnThisHostAreReadFromTheirFiles) {
  metrics::Counter& local_reads =
      metrics::Registry::Default()
          .Counter("ckptfs_client_local_chunk_reads_total", "", {"result"})
          .WithLabels({"local"});
  const std::string data = RandomBytes(5 * kChunk + 99, 77);
  auto created = writer_->Create(dir_, "local", 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(created->file->Write(0, data.data(), data.size()).ok());
  const uint64_t ino = created->file->ino();
  ASSERT_TRUE(created->file->Close().ok());

  metrics::Counter& tcp_reads = metrics::Registry::Default()
                                    .Counter("ckptfs_client_chunk_requests_total", "", {"op"})
                                    .WithLabels({"READ"});
  const uint64_t before = local_reads.value();
  const uint64_t tcp_before = tcp_reads.value();
  EXPECT_TRUE(SameBytes(ReadAll(*reader_, ino), data));
  EXPECT_GE(local_reads.value() - before, 6u);  // every chunk
  EXPECT_EQ(tcp_reads.value(), tcp_before);     // none over TCP

  const uint64_t after = local_reads.value();
  EXPECT_TRUE(SameBytes(ReadAll(*tcp_reader_, ino), data));
  EXPECT_EQ(local_reads.value(), after);
  EXPECT_GE(tcp_reads.value() - tcp_before, 6u);
}

// With local_writes, whole chunks for the servers on this host are written
// as chunk files in their tmp/ and adopted (the ADOPT request); partial
// rewrites go over TCP. Every reader, in place or over TCP, reads the same
// bytes, and no file is left in any tmp/.
TEST_F(ClientClusterTest, ChunksOfServersOnThisHostAreWrittenAsTheirFiles) {
  metrics::Counter& local_writes =
      metrics::Registry::Default()
          .Counter("ckptfs_client_local_chunk_writes_total", "", {"result"})
          .WithLabels({"local"});
  metrics::Counter& fallbacks =
      metrics::Registry::Default()
          .Counter("ckptfs_client_local_chunk_writes_total", "", {"result"})
          .WithLabels({"fallback"});
  std::unique_ptr<Client> local_writer = Connect(/*local_reads=*/true, /*local_writes=*/true);
  ASSERT_NE(local_writer, nullptr);
  std::string data = RandomBytes(5 * kChunk + 99, 78);
  const uint64_t before = local_writes.value();
  const uint64_t fallbacks_before = fallbacks.value();
  auto created =
      local_writer->Create(dir_, "written-in-place", 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(created->file->Write(0, data.data(), data.size()).ok());
  const uint64_t ino = created->file->ino();
  ASSERT_TRUE(created->file->Close().ok());
  EXPECT_EQ(local_writes.value() - before, 6u);  // every chunk, the short last one too
  EXPECT_EQ(fallbacks.value(), fallbacks_before);
  EXPECT_TRUE(SameBytes(ReadAll(*tcp_reader_, ino), data));
  EXPECT_TRUE(SameBytes(ReadAll(*reader_, ino), data));

  // A rewrite of a few bytes inside a chunk merges, over TCP.
  auto reopened = local_writer->Open(ino, O_WRONLY);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  const std::string patch = RandomBytes(300, 79);
  ASSERT_TRUE((*reopened)->Write(kChunk + 10, patch.data(), patch.size()).ok());
  ASSERT_TRUE((*reopened)->Close().ok());
  data.replace(kChunk + 10, patch.size(), patch);
  EXPECT_TRUE(SameBytes(ReadAll(*tcp_reader_, ino), data));
  EXPECT_TRUE(SameBytes(ReadAll(*reader_, ino), data));
  EXPECT_EQ(local_writes.value() - before, 6u);

  for (int i = 0; i < cluster_->storage_servers(); ++i) {
    const std::string tmp = cluster_->storage_dir(i) + "/tmp";
    EXPECT_TRUE(std::filesystem::is_empty(tmp)) << tmp;
  }
}

TEST_F(ClientClusterTest, RandomOverwritesPastEndAndTruncate) {
  std::mt19937 rng(5);
  std::string model;
  auto created = writer_->Create(dir_, "random", 0644, 0, 0, O_RDWR | O_CREAT);
  ASSERT_TRUE(created.ok());
  std::unique_ptr<File> file = std::move(created->file);
  const uint64_t ino = file->ino();
  for (int op = 0; op < 120; ++op) {
    const uint64_t offset = rng() % (6 * kChunk);
    const size_t len = 1 + rng() % (kChunk + 1000);
    const std::string data = RandomBytes(len, 1000 + op);
    ASSERT_TRUE(file->Write(offset, data.data(), len).ok());
    if (model.size() < offset + len) model.resize(offset + len, '\0');
    model.replace(offset, len, data);
  }
  ASSERT_TRUE(file->Close().ok());
  ASSERT_TRUE(SameBytes(ReadAll(*reader_, ino), model));
  ASSERT_TRUE(SameBytes(ReadAll(*tcp_reader_, ino), model));

  // Truncate down mid-chunk, then extend: the cut bytes read as zeros.
  meta::SetAttrRequest request;
  request.set_ino(ino);
  request.set_valid(meta::SET_SIZE);
  request.set_size(kChunk + 77);
  ASSERT_TRUE(writer_->SetAttr(request).ok());
  model.resize(kChunk + 77);
  EXPECT_TRUE(SameBytes(ReadAll(*reader_, ino), model));
  auto reopened = writer_->Open(ino, O_WRONLY);
  ASSERT_TRUE(reopened.ok());
  ASSERT_TRUE((*reopened)->Write(4ull * kChunk, "end", 3).ok());
  ASSERT_TRUE((*reopened)->Close().ok());
  model.resize(4ull * kChunk, '\0');
  model += "end";
  EXPECT_TRUE(SameBytes(ReadAll(*reader_, ino), model));

  // O_TRUNC through Create: a shorter rewrite leaves no old byte.
  auto again = writer_->Create(dir_, "random", 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->attr.size(), 0u);
  const std::string fresh = RandomBytes(kChunk / 2, 77);
  ASSERT_TRUE(again->file->Write(0, fresh.data(), fresh.size()).ok());
  ASSERT_TRUE(again->file->Fsync().ok());
  ASSERT_TRUE(again->file->Close().ok());
  EXPECT_TRUE(SameBytes(ReadAll(*reader_, ino), fresh));
  EXPECT_TRUE(SameBytes(ReadAll(*tcp_reader_, ino), fresh));
}

TEST_F(ClientClusterTest, DeadStorageServerFailsTheClose) {
  auto created = writer_->Create(dir_, "doomed", 0644, 0, 0, O_WRONLY | O_CREAT);
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(cluster_->StopStorage(0, SIGKILL).ok());
  ASSERT_TRUE(cluster_->StopStorage(1, SIGKILL).ok());
  ASSERT_TRUE(cluster_->StopStorage(2, SIGKILL).ok());
  const std::string data = RandomBytes(4 * kChunk, 3);
  (void)created->file->Write(0, data.data(), data.size());
  absl::Status closed = created->file->Close();
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(ErrnoFromStatus(closed), EIO);  // "connection refused" is in the message
  // The message names the server and what to do.
  EXPECT_NE(closed.message().find("127.0.0.1:"), absl::string_view::npos) << closed;
  EXPECT_NE(closed.message().find("check `ckptfs status`"), absl::string_view::npos) << closed;
}

TEST_F(ClientClusterTest, ClientsAnnounceThemselvesInClusterStatus) {
  // The server credential: the test also poses as a storage server below.
  GrpcMetaClient meta(cluster_->meta_address(), absl::Seconds(10), cluster_->server_credential());
  // writer_, reader_ and tcp_reader_: three clients of this process. Their
  // first heartbeat leaves as their thread starts; wait for all (bounded).
  auto mine = [](const meta::ClusterStatusReply& reply) {
    std::vector<meta::ClientInfo> out;
    for (const meta::ClientInfo& c : reply.clients()) {
      if (c.pid() == static_cast<uint32_t>(::getpid())) out.push_back(c);
    }
    return out;
  };
  absl::StatusOr<meta::ClusterStatusReply> status;
  for (int i = 0; i < 100; ++i) {
    status = meta.ClusterStatus(meta::ClusterStatusRequest());
    ASSERT_TRUE(status.ok()) << status.status();
    if (mine(*status).size() >= 3) break;
    ::usleep(50 * 1000);
  }
  EXPECT_EQ(status->servers_size(), 3);
  EXPECT_EQ(status->redundancy(), "none (1 copy)");
  const std::vector<meta::ClientInfo> clients = mine(*status);
  ASSERT_EQ(clients.size(), 3u) << status->DebugString();  // writer_, reader_, tcp_reader_
  EXPECT_NE(clients[0].client_id(), clients[1].client_id());
  EXPECT_NE(clients[1].client_id(), clients[2].client_id());
  for (const meta::ClientInfo& c : clients) {
    EXPECT_TRUE(c.mountpoint().empty());  // not a FUSE daemon
    EXPECT_FALSE(c.version().empty());
    EXPECT_FALSE(c.hostname().empty());
    EXPECT_GT(c.started_ms(), 0);
    EXPECT_GT(c.last_heartbeat_ms(), 0);
  }
  // A storage server's load rides on its heartbeat: two of them make a rate.
  // A stand-in server of its own, so the real servers' heartbeats (with
  // their own totals) do not interleave.
  meta::RegisterServerRequest registration;
  registration.set_address("127.0.0.1:1");
  registration.set_uuid("load-test-stand-in");
  auto registered = meta.RegisterServer(registration);
  ASSERT_TRUE(registered.ok()) << registered.status();
  const uint32_t server_id = registered->server_id();
  meta::HeartbeatRequest beat;
  beat.set_server_id(server_id);
  beat.set_load_reported(true);
  beat.set_connections(3);
  ASSERT_TRUE(meta.Heartbeat(beat).ok());
  ::usleep(20 * 1000);
  beat.set_bytes_read_total(uint64_t{1} << 30);
  beat.set_bytes_written_total(uint64_t{1} << 20);
  ASSERT_TRUE(meta.Heartbeat(beat).ok());
  status = meta.ClusterStatus(meta::ClusterStatusRequest());
  ASSERT_TRUE(status.ok()) << status.status();
  bool found = false;
  for (const meta::ServerStatus& s : status->servers()) {
    if (s.info().id() != server_id) continue;
    found = true;
    EXPECT_TRUE(s.load_reported());
    EXPECT_EQ(s.connections(), 3u);
    // 1 GiB within at least 20 ms (the board counts whole milliseconds, so
    // exactly 20 is possible): above 0, at most 1 GiB * 1000 / 20.
    EXPECT_GT(s.read_bytes_per_s(), 0u);
    EXPECT_LE(s.read_bytes_per_s(), (uint64_t{1} << 30) * 50);
    EXPECT_GT(s.read_bytes_per_s(), s.write_bytes_per_s());
  }
  EXPECT_TRUE(found);
  // A heartbeat without an id is refused.
  meta::ClientHeartbeatRequest empty;
  EXPECT_FALSE(meta.ClientHeartbeat(empty).ok());
}

}  // namespace
}  // namespace ckptfs::client
