// Bad input never crashes a server: a malformed frame, a frame with an
// oversized length and an unknown op sent to a storage server, and garbage
// sent to the metadata service (a request that does not parse, and bytes
// that are not HTTP/2 at all), each get an error, and the servers go on
// serving everyone else. Also: frames cut off inside their header or payload
// (nothing stored), pipelined requests with repeated and out-of-order ids
// (each answered), and metadata RPCs with unknown inode ids, invalid names
// and a 2^32-1 readdir limit (each a clear errno). The fuzz targets of
// tests/fuzz cover the same ground in process with generated input. The
// cluster requires its credential (LocalCluster's default): every
// connection and call here presents it, so what is refused is the input,
// not the caller (tests/auth checks the refusals of callers).
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>

#include <cerrno>
#include <future>
#include <iterator>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/credential.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "proto/meta.grpc.pb.h"
#include "tests/common/recv_eof.h"
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
    EXPECT_EQ(RecvOneByte(fd->get()), 0) << "connection should be closed";
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
  auto channel = grpc::CreateChannel(cluster_->meta_address(), grpc::InsecureChannelCredentials());
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

// Sends `header` and `payload` as one frame on a raw socket.
void SendFrame(int fd, const data::RequestHeader& header, const std::string& payload = "") {
  ASSERT_TRUE(WriteFrame(fd, header, payload.data(), payload.size()).ok());
}

TEST_F(BadInputTest, FrameCutOffMidPayloadStoresNothingAndTheServerGoesOn) {
  // A WRITE whose frame promises 1 MiB of payload, closed after 1000 bytes.
  const uint64_t ino = 0xbad0001;
  {
    auto fd = ConnectTcp(StorageAddr(), absl::Seconds(5));
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(
        PresentCredential(fd->get(), cluster_->credential(), absl::Seconds(5), "storage").ok());
    data::RequestHeader write;
    write.set_request_id(1);
    write.set_op(data::WRITE);
    write.set_ino(ino);
    write.set_payload_crc32c(1);
    std::string head(kFramePrefixSize, '\0');
    ASSERT_TRUE(write.AppendToString(&head));
    EncodeFramePrefix({static_cast<uint32_t>(head.size() - kFramePrefixSize), 1u << 20},
                      head.data());
    head.append(1000, 'p');
    ASSERT_TRUE(SendAll(fd->get(), head.data(), head.size()).ok());
  }
  // A prefix cut off inside its header, then closed.
  {
    auto fd = ConnectTcp(StorageAddr(), absl::Seconds(5));
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(
        PresentCredential(fd->get(), cluster_->credential(), absl::Seconds(5), "storage").ok());
    char prefix[kFramePrefixSize];
    EncodeFramePrefix({100, 0}, prefix);
    const std::string bytes = std::string(prefix, sizeof(prefix)) + "\x08\x01";
    ASSERT_TRUE(SendAll(fd->get(), bytes.data(), bytes.size()).ok());
  }
  // Nothing of the cut-off WRITE was stored, and others are served.
  auto conn = DataConnection::Connect(StorageAddr(), absl::Seconds(5));
  ASSERT_TRUE(conn.ok()) << conn.status();
  ASSERT_TRUE(PresentCredential(**conn, cluster_->credential()).ok());
  data::RequestHeader read;
  read.set_op(data::READ);
  read.set_ino(ino);
  read.set_length(4096);
  char buffer[4096];
  auto reply = (*conn)->Call(read, nullptr, 0, buffer, sizeof(buffer));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(ErrnoFromStatus(reply.status()), ENOENT) << reply.status();
  ExpectStorageServes();
}

TEST_F(BadInputTest, RepeatedAndOutOfOrderRequestIdsAreEachAnswered) {
  auto fd = ConnectTcp(StorageAddr(), absl::Seconds(5));
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(SetSocketTimeouts(fd->get(), absl::Seconds(10)).ok());
  ASSERT_TRUE(
      PresentCredential(fd->get(), cluster_->credential(), absl::Seconds(5), "storage").ok());
  // Pipelined, ids out of order and one repeated: the server does not
  // match requests up, it answers each one with its own id.
  const uint64_t ids[] = {9, 4, 9, 2};
  for (uint64_t id : ids) {
    data::RequestHeader request;
    request.set_request_id(id);
    request.set_op(id == 2 ? data::READ : data::PING);
    request.set_ino(0xbad0002);
    request.set_length(10);
    SendFrame(fd->get(), request);
  }
  std::multiset<uint64_t> answered;
  for (size_t i = 0; i < std::size(ids); ++i) {
    data::ResponseHeader reply;
    auto prefix = ReadFrameHead(fd->get(), reply);
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    ASSERT_TRUE(DiscardPayload(fd->get(), prefix->payload_len).ok());
    answered.insert(reply.request_id());
    EXPECT_EQ(reply.error(), reply.request_id() == 2 ? ENOENT : 0) << reply.ShortDebugString();
  }
  EXPECT_EQ(answered, std::multiset<uint64_t>(std::begin(ids), std::end(ids)));
  ExpectStorageServes();
}

TEST_F(BadInputTest, MetadataRpcsRefuseUnknownIdsInvalidNamesAndHugeLimits) {
  auto stub = meta::MetaService::NewStub(
      grpc::CreateChannel(cluster_->meta_address(), grpc::InsecureChannelCredentials()));
  // The errno a call failed with ("" when it succeeded).
  auto errno_of = [](const grpc::Status& s) { return s.ok() ? std::string() : s.error_details(); };
  auto context = [](grpc::ClientContext& c) {
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    AttachCredential(c, cluster_->credential());
  };
  const uint64_t unknown = 0x7fffffff0001ull;
  {
    grpc::ClientContext c;
    context(c);
    meta::ReadDirRequest req;
    req.set_ino(unknown);
    meta::ReadDirReply reply;
    EXPECT_EQ(errno_of(stub->ReadDir(&c, req, &reply)), absl::StrCat(ENOENT));
  }
  {
    grpc::ClientContext c;
    context(c);
    meta::SetXattrRequest req;
    req.set_ino(unknown);
    req.set_name("user.x");
    req.set_value("v");
    meta::Empty reply;
    EXPECT_EQ(errno_of(stub->SetXattr(&c, req, &reply)), absl::StrCat(ENOENT));
  }
  {
    grpc::ClientContext c;
    context(c);
    meta::DeclareCheckpointRequest req;
    req.set_ino(unknown);
    req.set_ranks(2);
    meta::CheckpointInfo reply;
    EXPECT_EQ(errno_of(stub->DeclareCheckpoint(&c, req, &reply)), absl::StrCat(ENOENT));
  }
  // Invalid names, for mkdir and as a rename target.
  for (const std::string& name : {std::string(""), std::string("/"), std::string("a/b"),
                                  std::string("."), std::string(".."), std::string("a\0b", 3)}) {
    grpc::ClientContext c;
    context(c);
    meta::MkdirRequest req;
    req.set_parent(1);
    req.set_name(name);
    req.set_mode(0755);
    meta::AttrReply reply;
    EXPECT_EQ(errno_of(stub->Mkdir(&c, req, &reply)), absl::StrCat(EINVAL))
        << "name '" << name << "'";
  }
  {
    grpc::ClientContext c;
    context(c);
    meta::MkdirRequest req;
    req.set_parent(1);
    req.set_name("bad-input-dir");
    req.set_mode(0755);
    meta::AttrReply reply;
    ASSERT_TRUE(stub->Mkdir(&c, req, &reply).ok());
  }
  {
    grpc::ClientContext c;
    context(c);
    meta::RenameRequest req;
    req.set_parent(1);
    req.set_name("bad-input-dir");
    req.set_new_parent(1);
    req.set_new_name("..");
    meta::Empty reply;
    EXPECT_EQ(errno_of(stub->Rename(&c, req, &reply)), absl::StrCat(EINVAL));
  }
  // A readdir limit of 2^32-1 is clamped to a page, not an allocation.
  {
    grpc::ClientContext c;
    context(c);
    meta::ReadDirRequest req;
    req.set_ino(1);
    req.set_limit(0xffffffffu);
    meta::ReadDirReply reply;
    const grpc::Status s = stub->ReadDir(&c, req, &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    bool found = false;
    for (const meta::DirEntry& e : reply.entries()) found = found || e.name() == "bad-input-dir";
    EXPECT_TRUE(found);
  }
  ExpectStorageServes();
}

}  // namespace
}  // namespace ckptfs::testing
