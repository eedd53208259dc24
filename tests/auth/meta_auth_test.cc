// The metadata service behind the credential, in process: every RPC of
// MetaService (taken from the service's descriptor, so a new RPC is covered
// without editing this test) is refused with UNAUTHENTICATED and EACCES when
// the call carries no credential or another one, before its handler runs;
// with the right one every RPC reaches its handler (none answers
// UNIMPLEMENTED, which a forgotten line in credential_check.h would). The
// RPCs administering the cluster take the server credential only: the
// client credential gets PERMISSION_DENIED there.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <filesystem>
#include <future>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/credential.h"
#include "gtest/gtest.h"
#include "proto/meta.grpc.pb.h"
#include "server/meta/meta_server.h"

namespace ckptfs::meta {
namespace {

constexpr char kSecret[] = "5ec2e7c0ffee5ec2e7c0ffee5ec2e7c0";
constexpr char kServerSecret[] = "5e7e75e7e75e7e75e7e75e7e75e7e75e";

// The RPCs that administer the cluster: the server credential only.
bool IsServerRpc(const std::string& method) {
  return method == "RegisterServer" || method == "Heartbeat" || method == "MoveStripeServer" ||
         method == "ReportRepair";
}

class MetaAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "ckptfs-meta-auth-XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    MetaServer::Options options;
    options.listen = "127.0.0.1:0";
    options.data_dir = dir_;
    options.credential = kSecret;
    options.server_credential = kServerSecret;
    options.commit_poll = absl::Milliseconds(100);
    auto server = MetaServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    channel_.reset();
    server_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Calls /ckptfs.meta.MetaService/`method` with an empty request (every
  // field at its default) carrying `credential` ("" for none).
  grpc::Status Call(const std::string& method, const std::string& credential) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    AttachCredential(context, credential);
    grpc::ByteBuffer request;  // empty: a default message
    grpc::Slice empty("");
    request = grpc::ByteBuffer(&empty, 1);
    grpc::ByteBuffer reply;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, absl::StrCat("/", MetaService::service_full_name(), "/", method),
                   grpc::StubOptions(), &request, &reply,
                   [&](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }

  static std::vector<std::string> Methods() {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            MetaService::service_full_name());
    std::vector<std::string> names;
    for (int i = 0; i < service->method_count(); ++i) names.push_back(service->method(i)->name());
    return names;
  }

  std::string dir_;
  std::unique_ptr<MetaServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(MetaAuthTest, EveryRpcWithoutTheCredentialIsRefused) {
  const std::vector<std::string> methods = Methods();
  ASSERT_GE(methods.size(), 28u);
  for (const std::string& method : methods) {
    const grpc::Status status = Call(method, "");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_EQ(status.error_details(), absl::StrCat(EACCES)) << method;
    EXPECT_TRUE(absl::StrContains(status.error_message(), "--credential_file"))
        << method << ": " << status.error_message();
  }
}

TEST_F(MetaAuthTest, EveryRpcWithAnotherCredentialIsRefused) {
  for (const std::string& method : Methods()) {
    const grpc::Status status = Call(method, "5ec2e7c0ffee5ec2e7c0ffee5ec2e7c1");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_TRUE(absl::StrContains(status.error_message(), "not this cluster's"))
        << method << ": " << status.error_message();
  }
}

TEST_F(MetaAuthTest, RefusedCallsChangeNothing) {
  // A Mkdir without the credential does not reach the namespace.
  auto stub = MetaService::NewStub(channel_);
  MkdirRequest mkdir;
  mkdir.set_parent(1);
  mkdir.set_name("intruder");
  mkdir.set_mode(0755);
  {
    grpc::ClientContext context;
    AttrReply reply;
    EXPECT_EQ(stub->Mkdir(&context, mkdir, &reply).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  LookupRequest lookup;
  lookup.set_parent(1);
  lookup.set_name("intruder");
  grpc::ClientContext context;
  AttachCredential(context, kSecret);
  AttrReply reply;
  const grpc::Status status = stub->Lookup(&context, lookup, &reply);
  EXPECT_EQ(status.error_details(), absl::StrCat(ENOENT)) << status.error_message();
}

TEST_F(MetaAuthTest, TheClientCredentialCannotAdministerTheCluster) {
  size_t server_rpcs = 0;
  for (const std::string& method : Methods()) {
    if (!IsServerRpc(method)) continue;
    ++server_rpcs;
    const grpc::Status status = Call(method, kSecret);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << method;
    EXPECT_EQ(status.error_details(), absl::StrCat(EACCES)) << method;
    EXPECT_TRUE(absl::StrContains(status.error_message(), "server-credential"))
        << method << ": " << status.error_message();
  }
  EXPECT_EQ(server_rpcs, 4u);
  // No storage server got registered by the refused call.
  auto stub = MetaService::NewStub(channel_);
  grpc::ClientContext context;
  AttachCredential(context, kSecret);
  ListServersReply servers;
  ASSERT_TRUE(stub->ListServers(&context, Empty(), &servers).ok());
  EXPECT_EQ(servers.servers_size(), 0);
}

TEST_F(MetaAuthTest, EveryRpcWithTheCredentialReachesItsHandler) {
  for (const std::string& method : Methods()) {
    // The client credential for the namespace, the server credential for
    // the cluster's administration; the server credential takes both.
    // Empty requests are mostly invalid: any answer but these means the
    // call got past the check to the service's handler.
    for (const char* credential : {IsServerRpc(method) ? kServerSecret : kSecret, kServerSecret}) {
      const grpc::Status status = Call(method, credential);
      EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
      EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << method;
      EXPECT_NE(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << method;
    }
  }
  // And a real one works end to end.
  auto stub = MetaService::NewStub(channel_);
  grpc::ClientContext context;
  AttachCredential(context, kSecret);
  InodeRequest root;
  root.set_ino(1);
  AttrReply reply;
  ASSERT_TRUE(stub->GetAttr(&context, root, &reply).ok());
  EXPECT_EQ(reply.attr().ino(), 1u);
}

}  // namespace
}  // namespace ckptfs::meta
