// LocalReadTransport (client/local_read_transport.h): chunk files written by
// a real ChunkStore read back in place — whole, in part, past the end, over
// several bounce pieces — and every file that is not right (missing, a
// flipped data byte, a header naming another chunk, cut short) left to the
// server. Which servers count as local (uuid, alive, a running pid), and
// that reads of local servers never reach the network while everything
// else does.
#include "client/local_read_transport.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/testing/fake_chunk_transport.h"
#include "client/testing/fake_meta_client.h"
#include "common/chunk_format.h"
#include "common/uring.h"
#include "gtest/gtest.h"
#include "server/storage/chunk_store.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::client {
namespace {

using storage::ChunkStore;
using storage::TempDir;

constexpr char kUuid[] = "9d1c0a52-0000-4000-8000-00000000abcd";

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = static_cast<uint32_t>(seed) * 2654435761u + 7;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

void WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// A pid no process has: a child that has exited and been reaped.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

class LocalReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto store = ChunkStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto ring = Ring::Create(16);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
  }

  void Store(uint64_t ino, uint32_t index, const std::string& data) {
    ASSERT_TRUE(store_->Write(*ring_, {ino, index}, 0, absl::string_view(data), true).ok());
  }

  // ReadChunkFile of [offset, offset + length) as a string, or nullopt.
  std::optional<std::string> ReadLocal(uint64_t ino, uint32_t index, uint32_t offset,
                                       size_t length) {
    std::string out(length, '\xee');
    std::optional<size_t> got =
        LocalReadTransport::ReadChunkFile(dir_.path(), ino, index, offset, out.data(), length);
    if (!got.has_value()) return std::nullopt;
    out.resize(*got);
    return out;
  }

  // How ListServers describes this directory's server.
  meta::ServerInfo Info() const {
    meta::ServerInfo info;
    info.set_id(1);
    info.set_address("127.0.0.1:7001");
    info.set_uuid(kUuid);
    info.set_alive(true);
    info.set_data_dir(dir_.path());
    return info;
  }

  // Makes the directory look like a running server's: its uuid, and the
  // LOCK file naming `pid`.
  void ClaimAs(pid_t pid) {
    WriteTextFile(dir_.path() + "/server.uuid", absl::StrCat(kUuid, "\n"));
    WriteTextFile(dir_.path() + "/LOCK", absl::StrCat(pid, "\n"));
  }

  TempDir dir_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Ring> ring_;
};

TEST_F(LocalReadTest, ReadsWhatTheStoreWrote) {
  const size_t sizes[] = {1, 4095, 4096, 5000, LocalReadTransport::kBouncePieceBytes - 4096,
                          LocalReadTransport::kBouncePieceBytes,
                          3 * LocalReadTransport::kBouncePieceBytes + 123};
  uint32_t index = 0;
  for (size_t size : sizes) {
    SCOPED_TRACE(absl::StrCat("chunk of ", size, " bytes"));
    const std::string data = Pattern(size, static_cast<int>(index));
    Store(5, index, data);
    EXPECT_EQ(ReadLocal(5, index, 0, size), data);
    // Asked for more: cut at the stored length, as the server does.
    EXPECT_EQ(ReadLocal(5, index, 0, size + 8192), data);
    // A part in the middle, and one running past the end.
    const uint32_t mid = static_cast<uint32_t>(size / 3);
    EXPECT_EQ(ReadLocal(5, index, mid, size / 3), data.substr(mid, size / 3));
    EXPECT_EQ(ReadLocal(5, index, mid, size), data.substr(mid));
    // Wholly past the end: nothing.
    EXPECT_EQ(ReadLocal(5, index, static_cast<uint32_t>(size) + 10, 100), std::string());
    ++index;
  }
}

TEST_F(LocalReadTest, AnythingOddIsLeftToTheServer) {
  const std::string data = Pattern(3 * 4096 + 17, 1);
  Store(9, 0, data);
  Store(9, 1, data);
  ASSERT_EQ(ReadLocal(9, 0, 0, data.size()), data);

  // Never written (or set aside by the scrubber).
  EXPECT_EQ(ReadLocal(9, 7, 0, data.size()), std::nullopt);
  EXPECT_EQ(ReadLocal(10, 0, 0, data.size()), std::nullopt);

  // A data byte flipped on disk: the CRC32C catches it, wherever the read.
  const std::string path0 = store_->ChunkPath({9, 0});
  {
    const int fd = ::open(path0.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, kChunkHeaderSize + 2 * 4096), 1);
    c = static_cast<char>(c ^ 0x40);
    ASSERT_EQ(::pwrite(fd, &c, 1, kChunkHeaderSize + 2 * 4096), 1);
    ::close(fd);
  }
  EXPECT_EQ(ReadLocal(9, 0, 0, data.size()), std::nullopt);
  EXPECT_EQ(ReadLocal(9, 0, 0, 100), std::nullopt);

  // A good file under another chunk's name: its header says so.
  std::filesystem::copy_file(store_->ChunkPath({9, 1}), store_->ChunkPath({9, 2}));
  EXPECT_EQ(ReadLocal(9, 2, 0, data.size()), std::nullopt);

  // Cut short (a file system that lost its tail).
  std::filesystem::resize_file(store_->ChunkPath({9, 1}), kChunkHeaderSize + 4096);
  EXPECT_EQ(ReadLocal(9, 1, 0, data.size()), std::nullopt);
}

TEST_F(LocalReadTest, ALocalServerIsAliveWithThisUuidAndARunningProcess) {
  // No server.uuid yet: not local.
  EXPECT_FALSE(LocalReadTransport::FindLocal(Info()).has_value());
  ClaimAs(::getpid());
  auto found = LocalReadTransport::FindLocal(Info());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->data_dir, dir_.path());
  EXPECT_EQ(found->pid, ::getpid());

  meta::ServerInfo other_uuid = Info();
  other_uuid.set_uuid("another-server");
  EXPECT_FALSE(LocalReadTransport::FindLocal(other_uuid).has_value());
  meta::ServerInfo dead = Info();
  dead.set_alive(false);
  EXPECT_FALSE(LocalReadTransport::FindLocal(dead).has_value());
  meta::ServerInfo old_build = Info();
  old_build.clear_data_dir();
  EXPECT_FALSE(LocalReadTransport::FindLocal(old_build).has_value());
  meta::ServerInfo elsewhere = Info();
  elsewhere.set_data_dir(dir_.path() + "/not-here");
  EXPECT_FALSE(LocalReadTransport::FindLocal(elsewhere).has_value());

  // The server's process is gone (its LOCK names a pid that has exited).
  ClaimAs(DeadPid());
  EXPECT_FALSE(LocalReadTransport::FindLocal(Info()).has_value());
}

// ListServers names server 1 with this test's directory and server 2 with
// none (another host, or an older build).
class LocalServersMeta : public testing::FakeMetaClient {
 public:
  explicit LocalServersMeta(meta::ServerInfo local) : local_(std::move(local)) {}
  absl::StatusOr<meta::ListServersReply> ListServers(const meta::Empty&) override {
    meta::ListServersReply reply;
    *reply.add_servers() = local_;
    meta::ServerInfo* remote = reply.add_servers();
    remote->set_id(2);
    remote->set_address("127.0.0.1:7002");
    remote->set_uuid("remote");
    remote->set_alive(true);
    ++list_calls;
    return reply;
  }
  int list_calls = 0;

 private:
  const meta::ServerInfo local_;
};

TEST_F(LocalReadTest, LocalChunksNeverReachTheNetwork) {
  ClaimAs(::getpid());
  const std::string local = Pattern(10000, 3);
  Store(4, 0, local);
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<testing::FakeChunkTransport>();
  testing::FakeChunkTransport* network = owned.get();
  const std::string remote = Pattern(5000, 4);
  ASSERT_TRUE(network->WriteChunk(2, 4, 0, 0, remote.data(), remote.size(), true).ok());
  const std::string served = Pattern(6000, 5);  // what server 1 answers for a chunk it has
  ASSERT_TRUE(network->WriteChunk(1, 4, 1, 0, served.data(), served.size(), true).ok());
  LocalReadTransport transport(std::move(owned), &meta);

  std::string out(20000, '\0');
  auto got = transport.ReadChunk(1, 4, 0, 0, out.data(), out.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(out.substr(0, *got), local);
  EXPECT_EQ(network->counts().reads, 0);

  // Not in the file (here: the fake server holds it): asked over the network.
  got = transport.ReadChunk(1, 4, 1, 0, out.data(), out.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(out.substr(0, *got), served);
  EXPECT_EQ(network->counts().reads, 1);

  // Another host's server.
  got = transport.ReadChunk(2, 4, 0, 0, out.data(), out.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(out.substr(0, *got), remote);
  EXPECT_EQ(network->counts().reads, 2);

  // Writes always go to the server.
  ASSERT_TRUE(transport.WriteChunk(1, 4, 5, 0, local.data(), 10, true).ok());
  EXPECT_EQ(network->counts().writes, 3);
  EXPECT_EQ(meta.list_calls, 1);  // loaded once, not per read
}

TEST_F(LocalReadTest, ADeadServersFilesAreNotReadInItsPlace) {
  // A stand-in for the server's process, alive until killed.
  const pid_t server = ::fork();
  if (server == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(server, 0);
  ClaimAs(server);
  Store(4, 0, Pattern(10000, 3));
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<testing::FakeChunkTransport>();
  testing::FakeChunkTransport* network = owned.get();
  network->SetServerDown(1, true);
  LocalReadTransport transport(std::move(owned), &meta);
  std::string out(20000, '\0');
  EXPECT_TRUE(transport.ReadChunk(1, 4, 0, 0, out.data(), out.size()).ok());
  EXPECT_EQ(network->counts().reads, 0);

  // Killed: its files are not read any more, though the map still has it.
  ::kill(server, SIGKILL);
  int status = 0;
  ::waitpid(server, &status, 0);
  EXPECT_FALSE(transport.ReadChunk(1, 4, 0, 0, out.data(), out.size()).ok());
  EXPECT_EQ(network->counts().reads, 1);
  EXPECT_EQ(meta.list_calls, 1);
}

}  // namespace
}  // namespace ckptfs::client
