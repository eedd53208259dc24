// Tests of MetricsHttpServer through a plain socket client: a scrape parses
// as the registry's exposition, other paths 404, other methods 405, an
// oversized request 431, garbage 400, a slow client is cut off, several
// scrapers are served at once (a slow one blocks nobody; beyond
// max_clients the oldest silent one goes), and destruction with a client
// connected returns.
#include "common/metrics/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "tests/metrics/exposition_parser.h"

namespace ckptfs::metrics {
namespace {

struct HttpReply {
  int status = 0;
  std::string head;
  std::string body;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.Counter("t_requests_total", "Requests.", {"op"}).WithLabels({"READ"}).Increment(5);
    Start(MetricsHttpServer::Options());
  }

  void Start(MetricsHttpServer::Options options) {
    server_.reset();
    absl::StatusOr<UniqueFd> fd = ListenTcp(HostPort{"127.0.0.1", 0}, 16);
    ASSERT_TRUE(fd.ok()) << fd.status();
    absl::StatusOr<uint16_t> port = LocalPort(fd->get());
    ASSERT_TRUE(port.ok());
    port_ = *port;
    server_listener_ = fd->get();
    auto server = MetricsHttpServer::Start(*std::move(fd), &registry_, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  UniqueFd Connect() {
    absl::StatusOr<UniqueFd> fd = ConnectTcp(HostPort{"127.0.0.1", port_}, absl::Seconds(10));
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (!fd.ok()) return UniqueFd();
    EXPECT_TRUE(SetSocketTimeouts(fd->get(), absl::Seconds(30)).ok());
    return *std::move(fd);
  }

  // Reads until the server closes; parses status line, head and body.
  static HttpReply ReadReply(int fd) {
    std::string all;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      all.append(buf, static_cast<size_t>(n));
    }
    HttpReply reply;
    const size_t end = all.find("\r\n\r\n");
    if (end == std::string::npos) return reply;
    reply.head = all.substr(0, end);
    reply.body = all.substr(end + 4);
    if (absl::StartsWith(reply.head, "HTTP/1.1 ")) {
      (void)absl::SimpleAtoi(reply.head.substr(9, 3), &reply.status);
    }
    return reply;
  }

  HttpReply Request(const std::string& request) {
    UniqueFd fd = Connect();
    if (!fd.valid()) return HttpReply();
    EXPECT_TRUE(SendAll(fd.get(), request.data(), request.size()).ok());
    return ReadReply(fd.get());
  }

  Registry registry_;
  uint16_t port_ = 0;
  int server_listener_ = -1;  // the server's listening socket (owned by it)
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(HttpServerTest, ScrapeReturnsTheRegistryInTextFormat) {
  HttpReply reply = Request("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  ASSERT_EQ(reply.status, 200) << reply.head;
  EXPECT_TRUE(absl::StrContains(reply.head, "Content-Type: text/plain; version=0.0.4"));
  EXPECT_TRUE(absl::StrContains(reply.head, absl::StrCat("Content-Length: ", reply.body.size())));
  EXPECT_EQ(reply.body, registry_.Render());
  absl::StatusOr<testing::Exposition> parsed = testing::ParseExposition(reply.body);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_NE(parsed->Find("t_requests_total", {{"op", "READ"}}), nullptr);
  EXPECT_EQ(parsed->Find("t_requests_total", {{"op", "READ"}})->value, 5);

  // Scrapes see new values; a query string is ignored; HEAD has no body.
  registry_.Counter("t_requests_total", "Requests.", {"op"}).WithLabels({"READ"}).Increment();
  reply = Request("GET /metrics?x=1 HTTP/1.0\r\n\r\n");
  ASSERT_EQ(reply.status, 200);
  EXPECT_TRUE(absl::StrContains(reply.body, "t_requests_total{op=\"READ\"} 6"));
  reply = Request("HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(reply.status, 200);
  EXPECT_TRUE(reply.body.empty());
}

TEST_F(HttpServerTest, OtherPathsMethodsAndGarbageAreRefused) {
  EXPECT_EQ(Request("GET / HTTP/1.1\r\n\r\n").status, 404);
  EXPECT_EQ(Request("GET /metricsx HTTP/1.1\r\n\r\n").status, 404);
  HttpReply post = Request("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.status, 405);
  EXPECT_TRUE(absl::StrContains(post.head, "Allow: GET, HEAD"));
  EXPECT_EQ(Request("hello\r\n\r\n").status, 400);
  EXPECT_EQ(Request("GET /metrics SPDY/3\r\n\r\n").status, 400);
  // And the server still answers a good request afterwards.
  EXPECT_EQ(Request("GET /metrics HTTP/1.1\r\n\r\n").status, 200);
}

TEST_F(HttpServerTest, OversizedRequestGets431) {
  const std::string huge =
      absl::StrCat("GET /metrics HTTP/1.1\r\nX-Filler: ", std::string(64 * 1024, 'a'), "\r\n\r\n");
  HttpReply reply = Request(huge);
  EXPECT_EQ(reply.status, 431) << reply.head;
  // A head that never ends is cut off at the limit too.
  UniqueFd fd = Connect();
  const std::string endless = std::string(9000, 'x');
  ASSERT_TRUE(SendAll(fd.get(), endless.data(), endless.size()).ok());
  EXPECT_EQ(ReadReply(fd.get()).status, 431);
  EXPECT_EQ(Request("GET /metrics HTTP/1.1\r\n\r\n").status, 200);
}

TEST_F(HttpServerTest, SilentClientIsCutOffAndTheNextOneServed) {
  MetricsHttpServer::Options options;
  options.io_timeout = absl::Milliseconds(200);
  Start(options);
  UniqueFd silent = Connect();
  const std::string partial = "GET /metr";
  ASSERT_TRUE(SendAll(silent.get(), partial.data(), partial.size()).ok());
  EXPECT_EQ(Request("GET /metrics HTTP/1.1\r\n\r\n").status, 200);
  // The silent one was closed without a response.
  HttpReply cut = ReadReply(silent.get());
  EXPECT_EQ(cut.status, 0);
}

TEST_F(HttpServerTest, ScrapersAreServedAtOnceAndASlowOneBlocksNobody) {
  // A minute for each client: a server that served one connection at a
  // time would leave the scrapes below unanswered past their 30 s receive
  // timeout.
  MetricsHttpServer::Options options;
  options.io_timeout = absl::Seconds(60);
  Start(options);
  std::vector<UniqueFd> slow;
  for (int i = 0; i < 3; ++i) {
    slow.push_back(Connect());
    const std::string partial = "GET /metrics HTTP/1.1\r\nHo";
    ASSERT_TRUE(SendAll(slow.back().get(), partial.data(), partial.size()).ok());
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Request("GET /metrics HTTP/1.1\r\n\r\n").status, 200);
  }
  // The slow ones finish their requests and are answered too.
  for (UniqueFd& fd : slow) {
    const std::string rest = "st: x\r\n\r\n";
    ASSERT_TRUE(SendAll(fd.get(), rest.data(), rest.size()).ok());
    EXPECT_EQ(ReadReply(fd.get()).status, 200);
  }
}

TEST_F(HttpServerTest, BeyondMaxClientsTheOldestSilentOneGoes) {
  MetricsHttpServer::Options options;
  options.io_timeout = absl::Seconds(60);
  options.max_clients = 2;
  Start(options);
  UniqueFd oldest = Connect();
  UniqueFd second = Connect();
  const std::string partial = "GET /met";
  ASSERT_TRUE(SendAll(oldest.get(), partial.data(), partial.size()).ok());
  ASSERT_TRUE(SendAll(second.get(), partial.data(), partial.size()).ok());
  EXPECT_EQ(Request("GET /metrics HTTP/1.1\r\n\r\n").status, 200);
  EXPECT_EQ(ReadReply(oldest.get()).status, 0);  // closed to make room
  const std::string rest = "rics HTTP/1.1\r\n\r\n";
  ASSERT_TRUE(SendAll(second.get(), rest.data(), rest.size()).ok());
  EXPECT_EQ(ReadReply(second.get()).status, 200);
}

// True once the listening socket behind `listener` (a dup of the server's)
// has no connection waiting in its accept queue: for a socket in LISTEN
// state, Linux reports the queue's length as tcpi_unacked.
bool AcceptQueueDrains(int listener) {
  for (int i = 0; i < 3000; ++i) {
    struct tcp_info info {};
    socklen_t len = sizeof(info);
    if (::getsockopt(listener, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
    if (info.tcpi_unacked == 0) return true;
    ::usleep(10 * 1000);
  }
  return false;
}

TEST_F(HttpServerTest, DestructionWithAClientConnectedMidRequestReturns) {
  // A second handle on the listening socket, to see the server accept.
  UniqueFd listener(::dup(server_listener_));
  ASSERT_TRUE(listener.valid());
  UniqueFd client = Connect();
  const std::string partial = "GET /metrics HTTP/1.1\r\nHost:";
  ASSERT_TRUE(SendAll(client.get(), partial.data(), partial.size()).ok());
  // The server thread holds the connection mid-request (not merely queued).
  ASSERT_TRUE(AcceptQueueDrains(listener.get()));
  listener = UniqueFd();  // else the port would stay bound below
  // Default io_timeout is 5 s; the destructor must not wait for it — but
  // what this asserts is only that it returns and the client sees a close.
  server_.reset();
  EXPECT_EQ(ReadReply(client.get()).status, 0);
  // The port is released: a new connection is refused.
  absl::StatusOr<UniqueFd> again = ConnectTcp(HostPort{"127.0.0.1", port_}, absl::Seconds(2));
  EXPECT_FALSE(again.ok());
}

TEST(MetricsListenTest, BusyPortAndBadAddressFailClearly) {
  absl::StatusOr<UniqueFd> taken = ListenTcp(HostPort{"127.0.0.1", 0}, 1);
  ASSERT_TRUE(taken.ok());
  const uint16_t port = *LocalPort(taken->get());
  Registry registry;
  auto busy = StartMetricsServer(absl::StrCat("127.0.0.1:", port), &registry);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(ErrnoFromStatus(busy.status()), EADDRINUSE);
  EXPECT_TRUE(absl::StrContains(busy.status().message(), "--metrics_listen")) << busy.status();
  EXPECT_TRUE(absl::StrContains(busy.status().message(), absl::StrCat(port))) << busy.status();
  auto bad = StartMetricsServer("no-port-here", &registry);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "--metrics_listen"));
}

}  // namespace
}  // namespace ckptfs::metrics
