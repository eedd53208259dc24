// The data-path server in-process, driven through common/DataConnection and
// through raw sockets sending malformed frames. Every bad input gets an
// error, and the server keeps serving the other connections.
#include "server/storage/server.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/crc32c.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "tests/common/recv_eof.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = static_cast<uint32_t>(seed) + 17;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 16);
  }
  return s;
}

std::string Prefix(uint32_t magic, uint32_t header_len, uint32_t payload_len) {
  std::string out(kFramePrefixSize, '\0');
  for (int i = 0; i < 4; ++i) {
    out[i] = static_cast<char>(magic >> (8 * i));
    out[4 + i] = static_cast<char>(header_len >> (8 * i));
    out[8 + i] = static_cast<char>(payload_len >> (8 * i));
  }
  return out;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto store = ChunkStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    Server::Options options;
    options.buffer_pool_bytes = kMinBufferPoolBytes;  // quick to populate
    auto server = Server::Start(*store_, {"127.0.0.1", 0}, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  std::unique_ptr<DataConnection> Connect() {
    auto connection = DataConnection::Connect(server_->address(), absl::Seconds(10));
    EXPECT_TRUE(connection.ok()) << connection.status();
    return connection.ok() ? *std::move(connection) : nullptr;
  }

  absl::Status Write(DataConnection& c, uint64_t ino, uint32_t index, uint32_t offset,
                     const std::string& data, bool replace) {
    data::RequestHeader request;
    request.set_op(data::WRITE);
    request.set_ino(ino);
    request.set_chunk_index(index);
    request.set_offset(offset);
    request.set_replace(replace);
    request.set_payload_crc32c(Crc32c(data.data(), data.size()));
    return c.Call(request, data.data(), data.size(), nullptr, 0).status();
  }

  absl::StatusOr<std::string> Read(DataConnection& c, uint64_t ino, uint32_t index, uint32_t offset,
                                   uint32_t length, uint32_t* chunk_length = nullptr) {
    data::RequestHeader request;
    request.set_op(data::READ);
    request.set_ino(ino);
    request.set_chunk_index(index);
    request.set_offset(offset);
    request.set_length(length);
    std::string out(length, '\0');
    auto response = c.Call(request, nullptr, 0, out.data(), out.size());
    if (!response.ok()) return response.status();
    if (chunk_length != nullptr) *chunk_length = response->header.chunk_length();
    out.resize(response->payload_len);
    return out;
  }

  absl::Status Simple(DataConnection& c, data::Op op, uint64_t ino, uint64_t trim_size = 0,
                      uint32_t chunk_size = 0) {
    data::RequestHeader request;
    request.set_op(op);
    request.set_ino(ino);
    request.set_trim_size(trim_size);
    request.set_chunk_size(chunk_size);
    return c.Call(request, nullptr, 0, nullptr, 0).status();
  }

  // A raw client socket.
  UniqueFd RawSocket() {
    auto fd = ConnectTcp(server_->address(), absl::Seconds(10));
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (!fd.ok()) return UniqueFd();
    EXPECT_TRUE(SetSocketTimeouts(fd->get(), absl::Seconds(10)).ok());
    return *std::move(fd);
  }

  // Reads one reply frame from a raw socket.
  absl::StatusOr<data::ResponseHeader> ReadReply(int fd) {
    data::ResponseHeader reply;
    auto prefix = ReadFrameHead(fd, reply);
    if (!prefix.ok()) return prefix.status();
    if (absl::Status s = DiscardPayload(fd, prefix->payload_len); !s.ok()) return s;
    return reply;
  }

  // True when the server closed `fd` cleanly: reads hit end of stream, not
  // a reset, even after the server reaped the connection (which a new
  // accept triggers).
  // `others`: connections that stay open meanwhile.
  bool ClosedByServer(int fd, size_t others) {
    ::shutdown(fd, SHUT_WR);  // ends the server's lingering close
    for (int i = 0; i < 200 && server_->active_connections() > others; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return RecvOneByte(fd) == 0;
  }

  TempDir dir_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, WriteReadRoundTrips) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  const std::vector<size_t> sizes = {0, 1, 4u << 20, (4u << 20) + 17};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string data = Pattern(sizes[i], static_cast<int>(i));
    ASSERT_TRUE(Write(*c, 100, static_cast<uint32_t>(i), 0, data, true).ok()) << sizes[i];
    uint32_t chunk_length = 12345;
    auto back = Read(*c, 100, static_cast<uint32_t>(i), 0, static_cast<uint32_t>(sizes[i]) + 100,
                     &chunk_length);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(chunk_length, sizes[i]);
    EXPECT_TRUE(*back == data) << "size " << sizes[i];
  }
}

TEST_F(ServerTest, MergeWriteAndPartialRead) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(Write(*c, 101, 0, 0, "hello world", true).ok());
  ASSERT_TRUE(Write(*c, 101, 0, 6, "there", false).ok());
  auto back = Read(*c, 101, 0, 3, 100);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "lo there");
}

TEST_F(ServerTest, MissingChunkIsEnoentAndTheConnectionGoesOn) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  auto missing = Read(*c, 102, 7, 0, 10);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(ErrnoFromStatus(missing.status()), ENOENT);
  EXPECT_FALSE(c->broken());
  EXPECT_TRUE(Simple(*c, data::PING, 0).ok());
}

TEST_F(ServerTest, TrimAndSync) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(Write(*c, 103, i, 0, Pattern(1000, i), true).ok());
  ASSERT_TRUE(Simple(*c, data::SYNC, 103).ok());
  ASSERT_TRUE(Simple(*c, data::TRIM, 103, 1500, 1000).ok());
  uint32_t len = 0;
  auto cut = Read(*c, 103, 1, 0, 1000, &len);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(len, 500u);
  EXPECT_EQ(*cut, Pattern(1000, 1).substr(0, 500));
  EXPECT_EQ(ErrnoFromStatus(Read(*c, 103, 2, 0, 10).status()), ENOENT);
  EXPECT_EQ(ErrnoFromStatus(Simple(*c, data::TRIM, 103, 10, 0)), EINVAL);
}

TEST_F(ServerTest, WholeStoreSyncIgnoresTheInode) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(Write(*c, 104, 0, 0, Pattern(1000, 4), true).ok());
  // Inode 105's chunk directory is a plain file: a per-inode SYNC of 105
  // cannot list it and fails, a whole-store SYNC never looks at it.
  const std::string bogus = store_->InodeDir(105);
  FILE* file = ::fopen(bogus.c_str(), "w");
  ASSERT_NE(file, nullptr);
  ::fclose(file);
  EXPECT_EQ(ErrnoFromStatus(Simple(*c, data::SYNC, 105)), ENOTDIR);
  data::RequestHeader request;
  request.set_op(data::SYNC);
  request.set_ino(105);
  request.set_whole_store(true);
  EXPECT_TRUE(c->Call(request, nullptr, 0, nullptr, 0).ok());
  request.set_ino(0);
  EXPECT_TRUE(c->Call(request, nullptr, 0, nullptr, 0).ok());
  ::unlink(bogus.c_str());
}

TEST_F(ServerTest, WrongPayloadCrcIsEbadmsgAndTheConnectionGoesOn) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  data::RequestHeader request;
  request.set_op(data::WRITE);
  request.set_ino(104);
  request.set_replace(true);
  const std::string data = "payload";
  request.set_payload_crc32c(Crc32c(data.data(), data.size()) ^ 1);
  auto response = c->Call(request, data.data(), data.size(), nullptr, 0);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(ErrnoFromStatus(response.status()), EBADMSG);
  EXPECT_FALSE(c->broken());
  EXPECT_EQ(ErrnoFromStatus(Read(*c, 104, 0, 0, 10).status()), ENOENT);  // nothing stored
  ASSERT_TRUE(Write(*c, 104, 0, 0, data, true).ok());
  EXPECT_EQ(*Read(*c, 104, 0, 0, 10), data);
}

TEST_F(ServerTest, RangesPastTheChunkLimitAreEinval) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(ErrnoFromStatus(Read(*c, 105, 0, kMaxChunkLength, 1).status()), EINVAL);
  EXPECT_EQ(ErrnoFromStatus(Write(*c, 105, 0, kMaxChunkLength - 1, "ab", false)), EINVAL);
  EXPECT_EQ(ErrnoFromStatus(Write(*c, 105, 0, 1, "ab", true)), EINVAL);
  EXPECT_TRUE(Simple(*c, data::PING, 0).ok());
}

TEST_F(ServerTest, UnknownOpIsAnErrorAndTheConnectionGoesOn) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  for (int op : {0, 99}) {
    absl::Status s = Simple(*c, static_cast<data::Op>(op), 1);
    ASSERT_FALSE(s.ok()) << op;
    EXPECT_EQ(ErrnoFromStatus(s), EOPNOTSUPP) << s;
    EXPECT_FALSE(c->broken());
  }
  EXPECT_TRUE(Simple(*c, data::PING, 0).ok());
}

TEST_F(ServerTest, RequestIdZeroIsRefusedAndTheConnectionGoesOn) {
  UniqueFd raw = RawSocket();
  data::RequestHeader ping;
  ping.set_op(data::PING);  // request_id 0
  ASSERT_TRUE(WriteFrame(raw.get(), ping, nullptr, 0).ok());
  auto reply = ReadReply(raw.get());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->error(), EINVAL);
  ping.set_request_id(5);
  ASSERT_TRUE(WriteFrame(raw.get(), ping, nullptr, 0).ok());
  reply = ReadReply(raw.get());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->error(), 0);
  EXPECT_EQ(reply->request_id(), 5u);
}

TEST_F(ServerTest, BadMagicGetsAnErrorFrameAndCloses) {
  auto good = Connect();
  ASSERT_NE(good, nullptr);
  UniqueFd raw = RawSocket();
  const std::string garbage = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(SendAll(raw.get(), garbage.data(), garbage.size()).ok());
  auto reply = ReadReply(raw.get());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->request_id(), 0u);
  EXPECT_EQ(reply->error(), EBADMSG);
  EXPECT_NE(reply->message().find("magic"), std::string::npos) << reply->message();
  EXPECT_TRUE(ClosedByServer(raw.get(), 1));
  // Others are unaffected, old and new connections alike.
  EXPECT_TRUE(Simple(*good, data::PING, 0).ok());
  auto fresh = Connect();
  ASSERT_NE(fresh, nullptr);
  ASSERT_TRUE(Write(*fresh, 106, 0, 0, "still here", true).ok());
  EXPECT_EQ(*Read(*good, 106, 0, 0, 100), "still here");
}

TEST_F(ServerTest, OversizedLengthsGetAnErrorFrameAndClose) {
  auto good = Connect();
  ASSERT_NE(good, nullptr);
  for (const std::string& prefix :
       {Prefix(kFrameMagic, 8, 0xffffffffu), Prefix(kFrameMagic, 8, kMaxFramePayload + 1),
        Prefix(kFrameMagic, 0x7fffffffu, 0), Prefix(kFrameMagic, 0, 0)}) {
    UniqueFd raw = RawSocket();
    ASSERT_TRUE(SendAll(raw.get(), prefix.data(), prefix.size()).ok());
    auto reply = ReadReply(raw.get());
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->request_id(), 0u);
    EXPECT_EQ(reply->error(), EMSGSIZE) << reply->message();
    EXPECT_NE(reply->message().find("length"), std::string::npos) << reply->message();
    EXPECT_TRUE(ClosedByServer(raw.get(), 1));
  }
  EXPECT_TRUE(Simple(*good, data::PING, 0).ok());
}

TEST_F(ServerTest, BadFrameFollowedByMuchDataStillGetsItsErrorFrame) {
  // The server stops parsing at the bad prefix but keeps reading (and
  // dropping) for a while, so a client in the middle of a big send can
  // finish it and read why it was refused.
  UniqueFd raw = RawSocket();
  const std::string garbage = "XXXX" + std::string(8 << 20, 'g');
  ASSERT_TRUE(SendAll(raw.get(), garbage.data(), garbage.size()).ok());
  auto reply = ReadReply(raw.get());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->error(), EBADMSG);
  EXPECT_TRUE(ClosedByServer(raw.get(), 0));
}

TEST_F(ServerTest, UnparsableHeaderGetsAnErrorFrameAndCloses) {
  UniqueFd raw = RawSocket();
  const std::string frame = Prefix(kFrameMagic, 4, 0) + std::string(4, '\xff');
  ASSERT_TRUE(SendAll(raw.get(), frame.data(), frame.size()).ok());
  auto reply = ReadReply(raw.get());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->error(), EBADMSG);
  EXPECT_TRUE(ClosedByServer(raw.get(), 0));
  auto good = Connect();
  ASSERT_NE(good, nullptr);
  EXPECT_TRUE(Simple(*good, data::PING, 0).ok());
}

TEST_F(ServerTest, ClientVanishingMidFrameDoesNotHurt) {
  {
    UniqueFd raw = RawSocket();
    const std::string partial = Prefix(kFrameMagic, 6, 1000) + "abc";
    ASSERT_TRUE(SendAll(raw.get(), partial.data(), partial.size()).ok());
  }  // closed inside the frame
  auto good = Connect();
  ASSERT_NE(good, nullptr);
  EXPECT_TRUE(Simple(*good, data::PING, 0).ok());
}

TEST_F(ServerTest, ManyClientsAtOnce) {
  constexpr int kClients = 6;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([this, t] {
      auto c = Connect();
      ASSERT_NE(c, nullptr);
      for (uint32_t i = 0; i < 5; ++i) {
        const std::string data = Pattern(300000 + i, t * 10 + static_cast<int>(i));
        ASSERT_TRUE(Write(*c, 200 + t, i, 0, data, true).ok());
        auto back = Read(*c, 200 + t, i, 0, 400000);
        ASSERT_TRUE(back.ok()) << back.status();
        EXPECT_TRUE(*back == data);
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

TEST_F(ServerTest, StopClosesOpenConnectionsAndReapsFinishedOnes) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(Simple(*c, data::PING, 0).ok());
  {
    auto short_lived = Connect();
    ASSERT_NE(short_lived, nullptr);
    EXPECT_TRUE(Simple(*short_lived, data::PING, 0).ok());
  }
  auto third = Connect();  // its accept reaps the finished one
  ASSERT_NE(third, nullptr);
  EXPECT_TRUE(Simple(*third, data::PING, 0).ok());
  for (int i = 0; i < 100 && server_->active_connections() > 2; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(server_->active_connections(), 2u);
  server_->Stop();
  EXPECT_FALSE(Simple(*c, data::PING, 0).ok());
  EXPECT_FALSE(DataConnection::Connect(server_->address(), absl::Seconds(1)).ok());
}

// A client whose host dies leaves no FIN: only TCP keepalive ends such an
// idle connection, so accepted sockets must have it on.
TEST_F(ServerTest, AcceptedConnectionsUseTcpKeepalive) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(Simple(*c, data::PING, 0).ok());
  // Server and test share this process: find the server's side among our fds
  // (bound to the server's port, not the listener).
  int found = 0;
  DIR* fds = ::opendir("/proc/self/fd");
  ASSERT_NE(fds, nullptr);
  while (dirent* entry = ::readdir(fds)) {
    const int fd = std::atoi(entry->d_name);
    if (fd <= 2 || fd == ::dirfd(fds)) continue;
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
        local.sin_family != AF_INET || ntohs(local.sin_port) != server_->address().port) {
      continue;
    }
    int listening = 0;
    socklen_t optlen = sizeof(listening);
    ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optlen), 0);
    if (listening) continue;
    int keepalive = 0;
    optlen = sizeof(keepalive);
    ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &keepalive, &optlen), 0);
    EXPECT_EQ(keepalive, 1) << "accepted socket fd " << fd << " has no TCP keepalive";
    ++found;
  }
  ::closedir(fds);
  EXPECT_EQ(found, 1);
}

}  // namespace
}  // namespace ckptfs::storage

namespace ckptfs::storage {
namespace {

TEST(ServerLimitTest, ConnectionsOverTheLimitAreToldEagain) {
  TempDir dir;
  auto store = ChunkStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  Server::Options options;
  options.max_connections = 2;
  options.buffer_pool_bytes = kMinBufferPoolBytes;
  auto server = Server::Start(**store, {"127.0.0.1", 0}, options);
  ASSERT_TRUE(server.ok());
  std::vector<std::unique_ptr<DataConnection>> held;
  data::RequestHeader ping;
  ping.set_op(data::PING);
  for (int i = 0; i < 2; ++i) {
    auto c = DataConnection::Connect((*server)->address(), absl::Seconds(5));
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Call(ping, nullptr, 0, nullptr, 0).ok());
    held.push_back(*std::move(c));
  }
  auto extra = ConnectTcp((*server)->address(), absl::Seconds(5));
  ASSERT_TRUE(extra.ok());
  ASSERT_TRUE(SetSocketTimeouts(extra->get(), absl::Seconds(10)).ok());
  data::ResponseHeader reply;
  auto prefix = ReadFrameHead(extra->get(), reply);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(reply.error(), EAGAIN);
  // Once one goes, a new connection is served again.
  held.pop_back();
  bool served = false;
  for (int attempt = 0; attempt < 100 && !served; ++attempt) {
    auto c = DataConnection::Connect((*server)->address(), absl::Seconds(5));
    ASSERT_TRUE(c.ok());
    served = (*c)->Call(ping, nullptr, 0, nullptr, 0).ok();
    if (!served) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(served);
}

}  // namespace
}  // namespace ckptfs::storage
