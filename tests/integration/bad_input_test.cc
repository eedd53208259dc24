// Bad input never crashes a server: a malformed frame, a frame with an
// oversized length and an unknown op sent to a storage server, and garbage
// sent to the metadata service (a request that does not parse, and bytes
// that are not HTTP/2 at all), each get an error, and the servers go on
// serving everyone else. The cluster requires its credential (LocalCluster's
// default): every connection and call here presents it, so what is refused
// is the input, not the caller (tests/auth checks the refusals of callers).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>

#include <cerrno>
#include <future>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/credential.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/net.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "proto/meta.grpc.pb.h"
#include "tests/integration/local_cluster.h"

namespace ckptfs::testing {
namespace {

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LocalClusterOptions options;
    options.storage_servers = 1;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  HostPort StorageAddr() { return *ParseHostPort(cluster_->storage_address(0)); }

  // The storage server still answers a PING on a fresh connection.
  void ExpectStorageServes() {
    auto conn = DataConnection::Connect(StorageAddr(), absl::Seconds(5));
    ASSERT_TRUE(conn.ok()) << conn.status();
    ASSERT_TRUE(PresentCredential(**conn, cluster_->credential()).ok());
    data::RequestHeader ping;
    ping.set_op(data::PING);
    auto reply = (*conn)->Call(ping, nullptr, 0, nullptr, 0);
    EXPECT_TRUE(reply.ok()) << reply.status();
  }

  // Sends raw bytes on a new connection and returns the error the server
  // replies with; expects the server to close the connection afterwards.
  data::ResponseHeader SendRawExpectErrorAndClose(const std::string& bytes) {
    auto fd = ConnectTcp(StorageAddr(), absl::Seconds(5));
    EXPECT_TRUE(fd.ok());
    EXPECT_TRUE(SetSocketTimeouts(fd->get(), absl::Seconds(10)).ok());
    EXPECT_TRUE(SendAll(fd->get(), bytes.data(), bytes.size()).ok());
    data::ResponseHeader reply;
    auto prefix = ReadFrameHead(fd->get(), reply);
    EXPECT_TRUE(prefix.ok()) << prefix.status();
    char byte;
    EXPECT_EQ(::recv(fd->get(), &byte, 1, 0), 0) << "connection should be closed";
    return reply;
  }

  static std::unique_ptr<LocalCluster> cluster_;
};

std::unique_ptr<LocalCluster> BadInputTest::cluster_;

TEST_F(BadInputTest, MalformedFrameGetsAnErrorAndTheServerGoesOn) {
  const data::ResponseHeader reply =
      SendRawExpectErrorAndClose("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(reply.error(), EBADMSG);
  EXPECT_FALSE(reply.message().empty());
  ExpectStorageServes();
}

TEST_F(BadInputTest, OversizedFrameLengthGetsAnErrorAndTheServerGoesOn) {
  char prefix[kFramePrefixSize];
  EncodeFramePrefix({16, 0x7fffffff}, prefix);
  const data::ResponseHeader reply =
      SendRawExpectErrorAndClose(std::string(prefix, sizeof(prefix)) + std::string(16, 'x'));
  EXPECT_EQ(reply.error(), EMSGSIZE);
  ExpectStorageServes();
}

TEST_F(BadInputTest, UnknownOpAndBadChecksumAreRefusedOnALiveConnection) {
  auto conn = DataConnection::Connect(StorageAddr(), absl::Seconds(5));
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE(PresentCredential(**conn, cluster_->credential()).ok());
  data::RequestHeader unknown;
  unknown.set_op(static_cast<data::Op>(99));
  EXPECT_FALSE((*conn)->Call(unknown, nullptr, 0, nullptr, 0).ok());
  data::RequestHeader write;
  write.set_op(data::WRITE);
  write.set_ino(123456);
  write.set_payload_crc32c(0xdeadbeef);  // wrong on purpose
  const std::string payload = "payload";
  auto reply = (*conn)->Call(write, payload.data(), payload.size(), nullptr, 0);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(ErrnoFromStatus(reply.status()), EBADMSG) << reply.status();
  // Same connection still works.
  data::RequestHeader ping;
  ping.set_op(data::PING);
  EXPECT_TRUE((*conn)->Call(ping, nullptr, 0, nullptr, 0).ok());
}

TEST_F(BadInputTest, GarbageGrpcRequestGetsAnErrorAndTheServiceGoesOn) {
  auto channel =
      grpc::CreateChannel(cluster_->meta_address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  // Bytes that are not a valid LookupRequest (a truncated varint field).
  const std::string junk("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11);
  grpc::Slice slice(junk);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  AttachCredential(ctx, cluster_->credential());
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, "/ckptfs.meta.MetaService/Lookup", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) { done.set_value(s); });
  const grpc::Status status = done.get_future().get();
  EXPECT_FALSE(status.ok());

  // A request naming no method at all.
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  AttachCredential(ctx2, cluster_->credential());
  std::promise<grpc::Status> done2;
  generic.UnaryCall(&ctx2, "/ckptfs.meta.MetaService/NoSuchCall", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) { done2.set_value(s); });
  EXPECT_EQ(done2.get_future().get().error_code(), grpc::StatusCode::UNIMPLEMENTED);

  // Bytes that are not HTTP/2 at all, on a raw socket.
  auto fd = ConnectTcp(*ParseHostPort(cluster_->meta_address()), absl::Seconds(5));
  ASSERT_TRUE(fd.ok());
  const std::string garbage(4096, '\x7f');
  (void)SendAll(fd->get(), garbage.data(), garbage.size());
  fd->Reset();

  // Unknown inodes and invalid names are refused with the right errno.
  auto stub = meta::MetaService::NewStub(channel);
  {
    grpc::ClientContext c;
    AttachCredential(c, cluster_->credential());
    meta::InodeRequest req;
    req.set_ino(0xfffffffffull);
    meta::AttrReply reply;
    const grpc::Status s = stub->GetAttr(&c, req, &reply);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.error_details(), absl::StrCat(ENOENT));
  }
  {
    grpc::ClientContext c;
    AttachCredential(c, cluster_->credential());
    meta::MkdirRequest req;
    req.set_parent(1);
    req.set_name(std::string(300, 'n'));
    meta::AttrReply reply;
    const grpc::Status s = stub->Mkdir(&c, req, &reply);
    EXPECT_EQ(s.error_details(), absl::StrCat(ENAMETOOLONG));
  }
  // The service still answers.
  grpc::ClientContext ok_ctx;
  ok_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  AttachCredential(ok_ctx, cluster_->credential());
  meta::InodeRequest root;
  root.set_ino(1);
  meta::AttrReply attr;
  const grpc::Status s = stub->GetAttr(&ok_ctx, root, &attr);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(attr.attr().ino(), 1u);
  ExpectStorageServes();
}

}  // namespace
}  // namespace ckptfs::testing
