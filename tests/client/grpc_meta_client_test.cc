// GrpcMetaClient against an in-process gRPC MetaService: errno crosses the
// wire, deadlines hold, UNAVAILABLE is retried for safe calls only (Create
// when it carries a writer id), and Client::Connect names an unreachable
// address.
#include "client/grpc_meta_client.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "common/errno_status.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"
#include "proto/meta.grpc.pb.h"

namespace ckptfs::client {
namespace {

// Answers a few RPCs the way the tests need.
class ScriptedService final : public meta::MetaService::Service {
 public:
  std::atomic<int> getattr_calls{0};
  std::atomic<int> create_calls{0};
  std::atomic<int> unavailable_getattrs{0};  // fail this many GetAttrs first

  grpc::Status GetAttr(grpc::ServerContext*, const meta::InodeRequest* request,
                       meta::AttrReply* reply) override {
    ++getattr_calls;
    if (unavailable_getattrs.fetch_sub(1) > 0) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    }
    reply->mutable_attr()->set_ino(request->ino());
    reply->mutable_attr()->set_size(42);
    return grpc::Status::OK;
  }
  grpc::Status Lookup(grpc::ServerContext*, const meta::LookupRequest* request,
                      meta::AttrReply*) override {
    return ToGrpcStatus(ErrnoStatus(ENOTEMPTY, absl::StrCat("scripted: ", request->name())));
  }
  std::atomic<int> unavailable_creates{1 << 20};  // fail this many Creates first
  grpc::Status Create(grpc::ServerContext*, const meta::CreateRequest* request,
                      meta::CreateReply* reply) override {
    ++create_calls;
    if (unavailable_creates.fetch_sub(1) > 0) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    }
    reply->mutable_attr()->set_ino(request->writer_handle());
    reply->set_created(true);
    return grpc::Status::OK;
  }
  std::atomic<int> rmdir_calls{0};
  grpc::Status Rmdir(grpc::ServerContext*, const meta::LookupRequest*, meta::Empty*) override {
    ++rmdir_calls;
    return grpc::Status::OK;
  }
  grpc::Status Mkdir(grpc::ServerContext*, const meta::MkdirRequest*, meta::AttrReply*) override {
    absl::SleepFor(absl::Milliseconds(4000));  // far past the client's deadline
    return grpc::Status::OK;
  }

  std::atomic<int> commit_calls{0};
  std::atomic<int> unavailable_commits{0};  // fail this many commits first
  // A long poll: held for wait_ms (or until the client goes away), then
  // answered PENDING.
  grpc::Status CommitCheckpoint(grpc::ServerContext* context,
                                const meta::CommitCheckpointRequest* request,
                                meta::CheckpointInfo* reply) override {
    ++commit_calls;
    if (unavailable_commits.fetch_sub(1) > 0) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    }
    const absl::Time end = absl::Now() + absl::Milliseconds(request->wait_ms());
    while (absl::Now() < end && !context->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
    reply->set_ino(request->ino());
    reply->set_state(meta::PENDING);
    return grpc::Status::OK;
  }
};

class GrpcMetaClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    address_ = absl::StrCat("127.0.0.1:", port_);
  }
  void TearDown() override { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  ScriptedService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
};

TEST_F(GrpcMetaClientTest, ErrnoCrossesTheWire) {
  GrpcMetaClient client(address_, absl::Seconds(5));
  meta::LookupRequest request;
  request.set_name("x");
  auto reply = client.Lookup(request);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(ErrnoFromStatus(reply.status()), ENOTEMPTY);  // not collapsed to its code
}

TEST_F(GrpcMetaClientTest, SafeCallsRetryUnavailable) {
  service_.unavailable_getattrs = 2;
  GrpcMetaClient client(address_, absl::Seconds(5));
  meta::InodeRequest request;
  request.set_ino(7);
  auto reply = client.GetAttr(request);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->attr().size(), 42u);
  EXPECT_EQ(service_.getattr_calls.load(), 3);
}

TEST_F(GrpcMetaClientTest, CreateWithoutAWriterIdIsNotRetried) {
  GrpcMetaClient client(address_, absl::Seconds(5));
  meta::CreateRequest request;
  request.set_name("f");
  auto reply = client.Create(request);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(service_.create_calls.load(), 1);
}

// A Create carrying a writer id is answered as its first attempt was when
// resent (the service recognises the id), so UNAVAILABLE is retried.
TEST_F(GrpcMetaClientTest, CreateWithAWriterIdIsRetried) {
  service_.unavailable_creates = 2;
  GrpcMetaClient client(address_, absl::Seconds(5));
  meta::CreateRequest request;
  request.set_name("f");
  request.set_exclusive(true);
  request.set_writer_handle(77);
  auto reply = client.Create(request);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->created());
  EXPECT_EQ(reply->attr().ino(), 77u);
  EXPECT_EQ(service_.create_calls.load(), 3);
}

// Retried only while the deadline lasts: a service that stays away is
// reported as a transport error (UNAVAILABLE, or the deadline if it passed
// during the last attempt).
TEST_F(GrpcMetaClientTest, CreateRetriesEndAtTheDeadline) {
  // Long enough for a second attempt after a slow first connect.
  GrpcMetaClient client(address_, absl::Milliseconds(2000));
  meta::CreateRequest request;
  request.set_name("f");
  request.set_writer_handle(77);
  auto reply = client.Create(request);
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(reply.status().code() == absl::StatusCode::kUnavailable ||
              reply.status().code() == absl::StatusCode::kDeadlineExceeded)
      << reply.status();
  EXPECT_TRUE(IsMetaTransportError(reply.status()));
  EXPECT_GT(service_.create_calls.load(), 1);
}

TEST_F(GrpcMetaClientTest, DeadlineIsEnforced) {
  GrpcMetaClient client(address_, absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  auto reply = client.Mkdir(meta::MkdirRequest());
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(ErrnoFromStatus(reply.status()), ETIMEDOUT);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(3000));  // well before the reply (4 s)
}

TEST_F(GrpcMetaClientTest, TransportErrorsAreMarked) {
  GrpcMetaClient client(address_, absl::Milliseconds(200));
  EXPECT_TRUE(IsMetaTransportError(client.Create(meta::CreateRequest()).status()));
  EXPECT_TRUE(IsMetaTransportError(client.Mkdir(meta::MkdirRequest()).status()));
  absl::Status from_service = client.Lookup(meta::LookupRequest()).status();
  ASSERT_FALSE(from_service.ok());
  EXPECT_FALSE(IsMetaTransportError(from_service));
}

TEST_F(GrpcMetaClientTest, CommitLongPollOutlivesTheRpcTimeout) {
  GrpcMetaClient client(address_, absl::Seconds(2));
  meta::CommitCheckpointRequest request;
  request.set_ino(9);
  request.set_wait_ms(3000);  // the deadline is wait_ms plus the rpc timeout
  auto reply = client.CommitCheckpoint(request, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->state(), meta::PENDING);
}

TEST_F(GrpcMetaClientTest, CommitRetriesUnavailable) {
  service_.unavailable_commits = 2;
  GrpcMetaClient client(address_, absl::Seconds(5));
  meta::CommitCheckpointRequest request;
  request.set_wait_ms(1);
  auto reply = client.CommitCheckpoint(request, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(service_.commit_calls.load(), 3);
}

TEST_F(GrpcMetaClientTest, CancelEndsTheLongPoll) {
  GrpcMetaClient client(address_, absl::Seconds(5));
  meta::CommitCheckpointRequest request;
  request.set_wait_ms(20000);
  Cancellation cancel;
  std::thread canceller([&] {
    while (service_.commit_calls.load() == 0) absl::SleepFor(absl::Milliseconds(1));
    cancel.Cancel();
  });
  const absl::Time start = absl::Now();
  auto reply = client.CommitCheckpoint(request, &cancel);
  canceller.join();
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(IsMetaTransportError(reply.status()));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // far before the poll's end
}

// A port nothing listens on (bound once by the kernel's choice, then
// closed).
int UnusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// What a takeover looks like to a client: the server it knew is gone, and
// the one that takes over starts listening a moment later. Even a call that
// is never resent (Rmdir) waits for it instead of failing while the
// channel has no connection, so it lands on the new server once.
TEST(GrpcMetaClientFailoverTest, CallsWaitForAServerThatStartsListeningLater) {
  const int dead = UnusedPort();
  const int late = UnusedPort();
  ASSERT_GT(dead, 0);
  ASSERT_GT(late, 0);
  GrpcMetaClient client(absl::StrCat("127.0.0.1:", dead, ",127.0.0.1:", late), absl::Seconds(20));
  ScriptedService service;
  std::unique_ptr<grpc::Server> server;
  std::thread starter([&] {
    absl::SleepFor(absl::Milliseconds(1500));
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", late), grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  });
  meta::LookupRequest request;
  request.set_name("d");
  absl::StatusOr<meta::Empty> reply = client.Rmdir(request);
  starter.join();
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(service.rmdir_calls.load(), 1);
  server->Shutdown(absl::ToChronoTime(absl::Now()));
}

// With no server at all the call ends at its deadline, and says that no
// metadata server answered.
TEST(GrpcMetaClientFailoverTest, NoServerEndsAtTheDeadlineWithAClearMessage) {
  const int dead = UnusedPort();
  ASSERT_GT(dead, 0);
  GrpcMetaClient client(absl::StrCat("127.0.0.1:", dead), absl::Milliseconds(500));
  absl::StatusOr<meta::Empty> reply = client.Rmdir(meta::LookupRequest());
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(IsMetaTransportError(reply.status()));
  EXPECT_NE(reply.status().message().find("no answer from the metadata service"),
            absl::string_view::npos)
      << reply.status();
}

TEST(ClientConnectTest, UnreachableServiceIsNamed) {
  ClientOptions options;
  // Port 1: nothing listens there (binding it needs root).
  options.meta_address = "127.0.0.1:1";
  options.rpc_timeout = absl::Milliseconds(400);
  auto client = Client::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("127.0.0.1:1"), absl::string_view::npos)
      << client.status();
}

}  // namespace
}  // namespace ckptfs::client
