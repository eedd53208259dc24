// TCP helpers: address parsing, listening (incl. a busy port), connecting,
// and whole-buffer send/receive semantics.
#include "common/tcp.h"

#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <thread>

#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs {
namespace {

TEST(ParseHostPortTest, ParsesHostAndPort) {
  auto a = ParseHostPort("127.0.0.1:7000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 7000);
  EXPECT_EQ(a->ToString(), "127.0.0.1:7000");

  auto b = ParseHostPort("localhost:65535");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "localhost");
  EXPECT_EQ(b->port, 65535);

  auto c = ParseHostPort("[::1]:80");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 80);
  EXPECT_EQ(c->ToString(), "[::1]:80");
}

TEST(ParseHostPortTest, RejectsMalformed) {
  for (absl::string_view bad : {"", "host", ":80", "host:", "host:0", "host:65536", "host:abc",
                                "host:-1", "[::1]80", "[::1", "[::1]:"}) {
    auto parsed = ParseHostPort(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ListenTcpTest, PortZeroGetsAPortAndABusyPortIsNamed) {
  auto first = ListenTcp({"127.0.0.1", 0});
  ASSERT_TRUE(first.ok()) << first.status();
  auto port = LocalPort(first->get());
  ASSERT_TRUE(port.ok());
  EXPECT_NE(*port, 0);
  auto second = ListenTcp({"127.0.0.1", *port});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(ErrnoFromStatus(second.status()), EADDRINUSE);
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(*port)),
            absl::string_view::npos)
      << second.status();
}

TEST(ConnectTcpTest, RefusedPortFails) {
  uint16_t port = 0;
  {
    auto listener = ListenTcp({"127.0.0.1", 0});
    ASSERT_TRUE(listener.ok());
    port = *LocalPort(listener->get());
  }  // closed: nothing listens there now
  auto fd = ConnectTcp({"127.0.0.1", port}, absl::Seconds(2));
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(ErrnoFromStatus(fd.status()), ECONNREFUSED);
}

class ConnectedPairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listener = ListenTcp({"127.0.0.1", 0});
    ASSERT_TRUE(listener.ok());
    auto port = LocalPort(listener->get());
    ASSERT_TRUE(port.ok());
    auto client = ConnectTcp({"127.0.0.1", *port}, absl::Seconds(5));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    server_.Reset(::accept(listener->get(), nullptr, nullptr));
    ASSERT_TRUE(server_.valid());
  }
  UniqueFd client_, server_;
};

TEST_F(ConnectedPairTest, SendAllRecvAllMoveLargeBuffers) {
  std::string out(8 << 20, '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 31);
  std::thread sender([&] {
    std::string head = "head";
    iovec iov[2] = {{head.data(), head.size()}, {out.data(), out.size()}};
    EXPECT_TRUE(SendAll(client_.get(), iov, 2).ok());
  });
  std::string got(4 + out.size(), '\0');
  ASSERT_TRUE(RecvAll(server_.get(), got.data(), got.size()).ok());
  sender.join();
  EXPECT_EQ(got.substr(0, 4), "head");
  EXPECT_TRUE(got.substr(4) == out);
}

TEST_F(ConnectedPairTest, CloseAtABoundaryIsEndOfStream) {
  client_.Reset();
  char byte;
  absl::Status s = RecvAll(server_.get(), &byte, 1);
  EXPECT_TRUE(IsEndOfStream(s)) << s;
}

TEST_F(ConnectedPairTest, CloseMidMessageIsConnReset) {
  ASSERT_TRUE(SendAll(client_.get(), "abc", 3).ok());
  client_.Reset();
  char buf[10];
  absl::Status s = RecvAll(server_.get(), buf, sizeof(buf));
  EXPECT_FALSE(IsEndOfStream(s));
  EXPECT_EQ(ErrnoFromStatus(s), ECONNRESET);
}

TEST_F(ConnectedPairTest, ReceiveTimeoutIsEtimedout) {
  ASSERT_TRUE(SetSocketTimeouts(server_.get(), absl::Milliseconds(50)).ok());
  char byte;
  absl::Status s = RecvAll(server_.get(), &byte, 1);
  EXPECT_EQ(ErrnoFromStatus(s), ETIMEDOUT) << s;
}

}  // namespace
}  // namespace ckptfs

namespace ckptfs {
namespace {

TEST(ConnectTcpTest, LocalhostReachesAnIpv4Listener) {
  auto listener = ListenTcp({"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  const uint16_t port = *LocalPort(listener->get());
  auto fd = ConnectTcp({"localhost", port}, absl::Seconds(5));
  EXPECT_TRUE(fd.ok()) << fd.status();
}

TEST(ConnectTcpTest, UnresolvableHostIsHostUnreachable) {
  auto fd = ConnectTcp({"bad host name!", 80}, absl::Seconds(2));
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(ErrnoFromStatus(fd.status()), EHOSTUNREACH);
}

}  // namespace
}  // namespace ckptfs
