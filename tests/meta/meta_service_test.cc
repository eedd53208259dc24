// The gRPC service in process: a MetaServer on 127.0.0.1:0 called through a
// real stub. Checks that errnos come back in error_details, that garbage and
// out-of-range requests get errors (and the server keeps serving), and that
// the whole namespace path works over the wire.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"
#include "proto/meta.grpc.pb.h"
#include "server/meta/keys.h"
#include "server/meta/meta_server.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

class MetaServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MetaServer::Options options;
    options.listen = "127.0.0.1:0";
    options.data_dir = dir_.path();
    auto server = MetaServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_NE(server_->port(), 0);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = MetaService::NewStub(channel_);
  }
  void TearDown() override {
    stub_.reset();
    channel_.reset();
    server_.reset();
  }

  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return context;
  }

  uint32_t Register(const std::string& uuid) {
    RegisterServerRequest request;
    request.set_address("127.0.0.1:9");
    request.set_uuid(uuid);
    request.set_capacity_bytes(1 << 30);
    RegisterServerReply reply;
    grpc::Status status = stub_->RegisterServer(Context().get(), request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.server_id();
  }

  TempDir dir_;
  std::unique_ptr<MetaServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<MetaService::Stub> stub_;
};

TEST_F(MetaServiceTest, ErrnoTravelsInErrorDetails) {
  InodeRequest request;
  request.set_ino(0);
  AttrReply reply;
  grpc::Status status = stub_->GetAttr(Context().get(), request, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_details(), absl::StrCat(ENOENT));
  EXPECT_EQ(ErrnoFromStatus(FromGrpcStatus(status, "GetAttr")), ENOENT);

  LookupRequest lookup;
  lookup.set_parent(kRootIno);
  lookup.set_name(std::string(256, 'x'));
  status = stub_->Lookup(Context().get(), lookup, &reply);
  EXPECT_EQ(status.error_details(), absl::StrCat(ENAMETOOLONG));

  // ENOTEMPTY and EISDIR share a canonical code; the errno keeps them apart.
  MkdirRequest mkdir;
  mkdir.set_parent(kRootIno);
  mkdir.set_name("d");
  mkdir.set_mode(0755);
  ASSERT_TRUE(stub_->Mkdir(Context().get(), mkdir, &reply).ok());
  const uint64_t dir = reply.attr().ino();
  mkdir.set_parent(dir);
  mkdir.set_name("sub");
  ASSERT_TRUE(stub_->Mkdir(Context().get(), mkdir, &reply).ok());
  lookup.set_parent(kRootIno);
  lookup.set_name("d");
  Empty empty;
  status = stub_->Rmdir(Context().get(), lookup, &empty);
  EXPECT_EQ(status.error_details(), absl::StrCat(ENOTEMPTY));
  status = stub_->Unlink(Context().get(), lookup, &empty);
  EXPECT_EQ(status.error_details(), absl::StrCat(EISDIR));
}

TEST_F(MetaServiceTest, NamespaceOperationsWorkOverTheWire) {
  const uint32_t id = Register("uuid-1");
  EXPECT_EQ(id, 1u);
  CreateRequest create;
  create.set_parent(kRootIno);
  create.set_name("model.pt");
  create.set_mode(0644);
  CreateReply created;
  ASSERT_TRUE(stub_->Create(Context().get(), create, &created).ok());
  EXPECT_TRUE(created.created());
  EXPECT_EQ(created.attr().layout().stripe_size(), 1);
  EXPECT_EQ(created.attr().layout().stripe(0), id);

  CommitWriteRequest commit;
  commit.set_ino(created.attr().ino());
  commit.set_size(4096);
  AttrReply attr;
  ASSERT_TRUE(stub_->CommitWrite(Context().get(), commit, &attr).ok());
  EXPECT_EQ(attr.attr().size(), 4096u);

  ReadDirRequest readdir;
  readdir.set_ino(kRootIno);
  ReadDirReply listing;
  ASSERT_TRUE(stub_->ReadDir(Context().get(), readdir, &listing).ok());
  ASSERT_EQ(listing.entries_size(), 1);
  EXPECT_EQ(listing.entries(0).name(), "model.pt");
  EXPECT_FALSE(listing.more());

  SetXattrRequest set;
  set.set_ino(kRootIno);
  set.set_name("user.ckptfs.chunk_size");
  set.set_value("65536");
  Empty empty;
  ASSERT_TRUE(stub_->SetXattr(Context().get(), set, &empty).ok());
  XattrNames names;
  InodeRequest root;
  root.set_ino(kRootIno);
  ASSERT_TRUE(stub_->ListXattr(Context().get(), root, &names).ok());
  ASSERT_EQ(names.names_size(), 1);

  StatFsReply stats;
  ASSERT_TRUE(stub_->StatFs(Context().get(), Empty(), &stats).ok());
  EXPECT_EQ(stats.files(), 2u);
  EXPECT_EQ(stats.servers_up(), 1u);
  EXPECT_EQ(stats.total_bytes(), 1u << 30);

  ListServersReply servers;
  ASSERT_TRUE(stub_->ListServers(Context().get(), Empty(), &servers).ok());
  ASSERT_EQ(servers.servers_size(), 1);
  EXPECT_TRUE(servers.servers(0).alive());

  HeartbeatRequest heartbeat;
  heartbeat.set_server_id(77);
  grpc::Status status = stub_->Heartbeat(Context().get(), heartbeat, &empty);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(MetaServiceTest, GarbageRequestsGetErrorsAndTheServerKeepsServing) {
  // Raw bytes that are not a valid LookupRequest, sent through a generic stub.
  grpc::GenericStub generic(channel_);
  const std::string garbage = "\xff\xff\xff\xff\x0f garbage \x08";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  absl::Mutex mu;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&context, "/ckptfs.meta.MetaService/Lookup", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      absl::MutexLock lock(&mu);
                      status = std::move(s);
                      done = true;
                    });
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&done));
  }
  EXPECT_FALSE(status.ok());

  // Out-of-range values: unknown inodes, a huge readdir limit.
  ReadDirRequest readdir;
  readdir.set_ino(~uint64_t{0});
  ReadDirReply listing;
  EXPECT_EQ(stub_->ReadDir(Context().get(), readdir, &listing).error_details(),
            absl::StrCat(ENOENT));
  readdir.set_ino(kRootIno);
  readdir.set_limit(0xffffffffu);
  EXPECT_TRUE(stub_->ReadDir(Context().get(), readdir, &listing).ok());
  SetAttrRequest setattr;
  setattr.set_ino(kRootIno);
  setattr.set_valid(0xffffffffu);
  AttrReply attr;
  EXPECT_EQ(stub_->SetAttr(Context().get(), setattr, &attr).error_details(), absl::StrCat(EISDIR));
  CreateRequest create;
  create.set_parent(kRootIno);
  create.set_name("no-servers");
  CreateReply created;
  EXPECT_EQ(stub_->Create(Context().get(), create, &created).error_details(), absl::StrCat(EIO));

  // Still serving.
  InodeRequest root;
  root.set_ino(kRootIno);
  EXPECT_TRUE(stub_->GetAttr(Context().get(), root, &attr).ok());
  EXPECT_EQ(attr.attr().type(), DIRECTORY);
}

TEST_F(MetaServiceTest, ASecondServerOnTheSameDataDirSaysInUse) {
  MetaServer::Options options;
  options.listen = "127.0.0.1:0";
  options.data_dir = dir_.path();
  auto second = MetaServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(ErrnoFromStatus(second.status()), EBUSY);
  EXPECT_NE(second.status().message().find("in use"), std::string::npos);
}

TEST_F(MetaServiceTest, ABusyPortIsRefusedWithItsAddress) {
  TempDir other;
  MetaServer::Options options;
  options.listen = server_->address();
  options.data_dir = other.path();
  auto second = MetaServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(ErrnoFromStatus(second.status()), EADDRINUSE);
  EXPECT_NE(second.status().message().find(server_->address()), std::string::npos)
      << second.status().message();
}

}  // namespace
}  // namespace ckptfs::meta
