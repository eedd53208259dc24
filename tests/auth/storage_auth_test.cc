// The storage server's handshake, on a Server in process: with a credential,
// a connection must open with HELLO carrying it; anything else, or a wrong
// one, gets one EACCES error frame (request_id 0) and the connection closes,
// while connections that present it are served as before. Without a
// credential HELLO is answered and nothing is required. One host holds at
// most a few connections that have not presented it.
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/credential.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "server/storage/chunk_store.h"
#include "server/storage/server.h"
#include "tests/common/recv_eof.h"

namespace ckptfs::storage {
namespace {

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef";

class StorageAuthTest : public ::testing::Test {
 protected:
  void Start(const std::string& credential) {
    std::string templ = ::testing::TempDir() + "ckptfs-storage-auth-XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    auto store = ChunkStore::Open(dir_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    Server::Options options;
    options.buffer_pool_bytes = kMinBufferPoolBytes;
    options.credential = credential;
    auto server = Server::Start(*store_, {"127.0.0.1", 0}, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    if (server_) server_->Stop();
    server_.reset();
    store_.reset();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  std::unique_ptr<DataConnection> Connect() {
    auto connection = DataConnection::Connect(server_->address(), absl::Seconds(10));
    EXPECT_TRUE(connection.ok()) << connection.status();
    return connection.ok() ? *std::move(connection) : nullptr;
  }

  static absl::Status Ping(DataConnection& c) {
    data::RequestHeader ping;
    ping.set_op(data::PING);
    return c.Call(ping, nullptr, 0, nullptr, 0).status();
  }

  // Sends `first` as the first frame of a raw connection; returns the reply
  // and whether the server closed the connection after it.
  std::pair<data::ResponseHeader, bool> FirstFrame(const data::RequestHeader& first) {
    auto fd = ConnectTcp(server_->address(), absl::Seconds(5));
    EXPECT_TRUE(fd.ok());
    EXPECT_TRUE(SetSocketTimeouts(fd->get(), absl::Seconds(10)).ok());
    EXPECT_TRUE(WriteFrame(fd->get(), first, nullptr, 0).ok());
    data::ResponseHeader reply;
    auto prefix = ReadFrameHead(fd->get(), reply);
    EXPECT_TRUE(prefix.ok()) << prefix.status();
    const bool closed = RecvOneByte(fd->get()) == 0;
    return {reply, closed};
  }

  std::string dir_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Server> server_;
};

TEST_F(StorageAuthTest, RequestWithoutHelloIsRefusedAndTheConnectionClosed) {
  Start(kSecret);
  data::RequestHeader ping;
  ping.set_request_id(7);
  ping.set_op(data::PING);
  auto [reply, closed] = FirstFrame(ping);
  EXPECT_EQ(reply.request_id(), 0u);
  EXPECT_EQ(reply.error(), EACCES);
  EXPECT_TRUE(absl::StrContains(reply.message(), "--credential_file")) << reply.message();
  EXPECT_TRUE(closed);
  // Through DataConnection: EACCES, and the connection is broken.
  std::unique_ptr<DataConnection> c = Connect();
  ASSERT_NE(c, nullptr);
  absl::Status s = Ping(*c);
  EXPECT_EQ(ErrnoFromStatus(s), EACCES) << s;
  EXPECT_TRUE(c->broken());
}

TEST_F(StorageAuthTest, WrongOrEmptyHelloIsRefused) {
  Start(kSecret);
  for (const std::string& wrong :
       {std::string("nope"), std::string(kSecret).substr(1) + "0", std::string()}) {
    data::RequestHeader hello;
    hello.set_request_id(1);
    hello.set_op(data::HELLO);
    hello.set_credential(wrong);
    auto [reply, closed] = FirstFrame(hello);
    EXPECT_EQ(reply.request_id(), 0u) << wrong;
    EXPECT_EQ(reply.error(), EACCES) << wrong;
    EXPECT_TRUE(closed) << wrong;
  }
  std::unique_ptr<DataConnection> c = Connect();
  ASSERT_NE(c, nullptr);
  absl::Status s = PresentCredential(*c, "wrong");
  EXPECT_EQ(ErrnoFromStatus(s), EACCES) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "not this cluster's")) << s;
}

TEST_F(StorageAuthTest, RightHelloIsAnsweredAndTheConnectionServes) {
  Start(kSecret);
  std::unique_ptr<DataConnection> c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(PresentCredential(*c, kSecret).ok());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Ping(*c).ok());
  // A write and its read back.
  data::RequestHeader write;
  write.set_op(data::WRITE);
  write.set_ino(42);
  const std::string payload = "authenticated bytes";
  write.set_replace(true);
  write.set_payload_crc32c(Crc32c(payload.data(), payload.size()));
  EXPECT_TRUE(c->Call(write, payload.data(), payload.size(), nullptr, 0).ok());
  data::RequestHeader read;
  read.set_op(data::READ);
  read.set_ino(42);
  read.set_length(payload.size());
  std::string out(payload.size(), '\0');
  auto got = c->Call(read, nullptr, 0, out.data(), out.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(out, payload);
  // HELLO opens a connection once: a second one (whose reply is not counted
  // in flight, so a stream of them would queue replies without bound) ends it.
  absl::Status again = PresentCredential(*c, kSecret);
  EXPECT_EQ(ErrnoFromStatus(again), EPROTO) << again;
  EXPECT_TRUE(c->broken());
}

// A connection that never presents the credential does not keep its slot:
// it is closed after the server's HELLO timeout (10 s).
TEST_F(StorageAuthTest, SilentConnectionIsClosedWithoutHello) {
  Start(kSecret);
  auto fd = ConnectTcp(server_->address(), absl::Seconds(5));
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(SetSocketTimeouts(fd->get(), absl::Seconds(60)).ok());
  const ssize_t got = RecvOneByte(fd->get());
  const int recv_errno = errno;
  EXPECT_EQ(got, 0) << std::strerror(recv_errno);  // closed by the server, no frame
}

TEST_F(StorageAuthTest, AHostHoldsFewSilentConnectionsAndItsClientsStillGetIn) {
  Start(kSecret);
  // 200 silent connections from 127.0.0.1 (more than max_strangers_per_host).
  std::vector<UniqueFd> strangers;
  for (int i = 0; i < 200; ++i) {
    auto fd = ConnectTcp(server_->address(), absl::Seconds(5));
    ASSERT_TRUE(fd.ok()) << fd.status();
    strangers.push_back(*std::move(fd));
  }
  // A client of the same host connects, authenticates and is served.
  std::unique_ptr<DataConnection> good = Connect();
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(PresentCredential(*good, kSecret).ok());
  EXPECT_TRUE(Ping(*good).ok());
  // The client counted too until its HELLO: of the 201, all but the newest
  // max_strangers_per_host were shut down; the oldest finds its stream ended.
  const size_t pushed_out = 201 - Server::Options().max_strangers_per_host;
  for (int i = 0; i < 200 && server_->strangers_evicted() < pushed_out; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(server_->strangers_evicted(), pushed_out);
  ASSERT_TRUE(SetSocketTimeouts(strangers.front().get(), absl::Seconds(10)).ok());
  EXPECT_EQ(RecvOneByte(strangers.front().get()), 0);
}

TEST_F(StorageAuthTest, RefusalsDoNotDisturbAnAuthenticatedConnection) {
  Start(kSecret);
  std::unique_ptr<DataConnection> good = Connect();
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(PresentCredential(*good, kSecret).ok());
  for (int i = 0; i < 20; ++i) {
    std::unique_ptr<DataConnection> bad = Connect();
    ASSERT_NE(bad, nullptr);
    EXPECT_EQ(ErrnoFromStatus(Ping(*bad)), EACCES);
    EXPECT_TRUE(Ping(*good).ok());
  }
}

TEST_F(StorageAuthTest, WithoutACredentialHelloIsOptional) {
  Start("");
  std::unique_ptr<DataConnection> plain = Connect();
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(Ping(*plain).ok());
  std::unique_ptr<DataConnection> greeted = Connect();
  ASSERT_NE(greeted, nullptr);
  EXPECT_TRUE(PresentCredential(*greeted, "any").ok());
  EXPECT_TRUE(Ping(*greeted).ok());
}

TEST_F(StorageAuthTest, HelloOnARawSocketBeforeTheEventLoopTakesIt) {
  // The io_uring client transport's path: HELLO on the blocking socket.
  Start(kSecret);
  auto fd = ConnectTcp(server_->address(), absl::Seconds(5));
  ASSERT_TRUE(fd.ok());
  EXPECT_TRUE(PresentCredential(fd->get(), kSecret, absl::Seconds(5), "test").ok());
  auto refused = ConnectTcp(server_->address(), absl::Seconds(5));
  ASSERT_TRUE(refused.ok());
  absl::Status s = PresentCredential(refused->get(), "wrong", absl::Seconds(5), "test");
  EXPECT_EQ(ErrnoFromStatus(s), EACCES) << s;
}

}  // namespace
}  // namespace ckptfs::storage
