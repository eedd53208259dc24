// MetaChannelTarget (common/meta_channel.h): the metadata address list
// becomes one gRPC target, bad entries are named; and a GrpcMetaClient over
// two addresses reaches whichever serves, before and after the one it used
// goes away (in-process stand-ins on loopback).
#include "common/meta_channel.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/grpc_meta_client.h"
#include "gtest/gtest.h"
#include "proto/meta.grpc.pb.h"

namespace ckptfs::client {
namespace {

TEST(MetaChannelTargetTest, OneEntryIsPassedThroughUnchanged) {
  EXPECT_EQ(*MetaChannelTarget("127.0.0.1:7000"), "127.0.0.1:7000");
  EXPECT_EQ(*MetaChannelTarget(" meta.example:7000 "), "meta.example:7000");
  EXPECT_EQ(*MetaChannelTarget("unix:/run/ckptfs.sock"), "unix:/run/ckptfs.sock");
}

TEST(MetaChannelTargetTest, SeveralIpv4EntriesBecomeOneIpv4Target) {
  EXPECT_EQ(*MetaChannelTarget("10.0.0.1:7000,10.0.0.2:7001"), "ipv4:10.0.0.1:7000,10.0.0.2:7001");
  EXPECT_EQ(*MetaChannelTarget("localhost:7000, 10.0.0.2:7001"),
            "ipv4:127.0.0.1:7000,10.0.0.2:7001");
}

TEST(MetaChannelTargetTest, SeveralIpv6EntriesBecomeOneIpv6Target) {
  EXPECT_EQ(*MetaChannelTarget("[::1]:7000,[fe80::1]:7001"), "ipv6:[::1]:7000,[fe80::1]:7001");
}

TEST(MetaChannelTargetTest, BadListsAreRejectedNamingTheEntry) {
  struct Case {
    const char* list;
    const char* names;
  } cases[] = {
      {"", "empty"},
      {"10.0.0.1:7000,", "empty entry"},
      {"10.0.0.1:7000,,10.0.0.2:7000", "empty entry"},
      {"10.0.0.1:7000,10.0.0.2", "'10.0.0.2'"},
      {"10.0.0.1:7000,10.0.0.2:0", "'10.0.0.2:0'"},
      {"10.0.0.1:7000,10.0.0.2:70000", "'10.0.0.2:70000'"},
      {"10.0.0.1:7000,10.0.0.2:x", "'10.0.0.2:x'"},
      {"10.0.0.1:7000,meta.example:7000", "'meta.example:7000'"},
      {"10.0.0.1:7000,[::1]:7000", "'[::1]:7000'"},
      {"[::1]:7000,[zz]:7000", "'[zz]:7000'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> target = MetaChannelTarget(c.list);
    ASSERT_FALSE(target.ok()) << c.list << " -> " << *target;
    EXPECT_EQ(target.status().code(), absl::StatusCode::kInvalidArgument) << c.list;
    EXPECT_TRUE(absl::StrContains(target.status().message(), c.names))
        << c.list << ": " << target.status();
  }
}

// A metadata service stand-in whose StatFs says which one answered.
class NamedService final : public meta::MetaService::Service {
 public:
  explicit NamedService(uint32_t id) : id_(id) {}
  grpc::Status StatFs(grpc::ServerContext*, const meta::Empty*, meta::StatFsReply* reply) override {
    reply->set_servers_total(id_);
    return grpc::Status::OK;
  }

 private:
  const uint32_t id_;
};

// One stand-in listening on 127.0.0.1:`port` (0: any free port).
struct StandIn {
  StandIn(uint32_t id, int port) : service(id) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                             &bound_port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  ~StandIn() { server->Shutdown(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", bound_port); }

  NamedService service;
  int bound_port = 0;
  std::unique_ptr<grpc::Server> server;
};

// A loopback port nobody listens on (a stand-in bound it, then went away).
int ClosedPort() {
  StandIn gone(0, 0);
  return gone.bound_port;
}

TEST(MetaChannelFailoverTest, ReachesTheServerThatListens) {
  const int dead = ClosedPort();
  ASSERT_GT(dead, 0);
  StandIn second(2, 0);
  ASSERT_GT(second.bound_port, 0);
  GrpcMetaClient meta(absl::StrCat("127.0.0.1:", dead, ",", second.address()), absl::Seconds(20));
  absl::StatusOr<meta::StatFsReply> reply = meta.StatFs(meta::Empty());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->servers_total(), 2u);
}

TEST(MetaChannelFailoverTest, FollowsTheServiceToTheOtherAddress) {
  auto first = std::make_unique<StandIn>(1, 0);
  ASSERT_GT(first->bound_port, 0);
  const int standby_port = ClosedPort();
  ASSERT_GT(standby_port, 0);
  GrpcMetaClient meta(absl::StrCat(first->address(), ",127.0.0.1:", standby_port),
                      absl::Seconds(20));
  absl::StatusOr<meta::StatFsReply> reply = meta.StatFs(meta::Empty());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->servers_total(), 1u);

  // The active one dies; the standby starts listening on its address. The
  // next call (StatFs retries UNAVAILABLE) lands there.
  first.reset();
  StandIn standby(2, standby_port);
  ASSERT_EQ(standby.bound_port, standby_port);
  reply = meta.StatFs(meta::Empty());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->servers_total(), 2u);
}

}  // namespace
}  // namespace ckptfs::client
