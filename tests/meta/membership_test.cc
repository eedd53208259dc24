// Membership tests: registration identity by uuid (only with the secret
// it was first registered with), heartbeats (NOT_FOUND for
// unknown ids), liveness on the service clock, input validation, and
// persistence in the store.
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

class MembershipTest : public NamespaceFixture {};

TEST_F(MembershipTest, SameUuidKeepsItsIdNewUuidGetsTheNext) {
  const uint32_t a = AddServer("uuid-a", 100, 0, "127.0.0.1:7001");
  const uint32_t b = AddServer("uuid-b", 100, 0, "127.0.0.1:7002");
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  // uuid-a comes back on another port: same id, new address.
  EXPECT_EQ(AddServer("uuid-a", 300, 10, "127.0.0.1:7009"), a);
  auto servers = membership_->ListServers();
  ASSERT_TRUE(servers.ok());
  ASSERT_EQ(servers->size(), 2u);
  EXPECT_EQ((*servers)[0].id(), a);
  EXPECT_EQ((*servers)[0].address(), "127.0.0.1:7009");
  EXPECT_EQ((*servers)[0].capacity_bytes(), 300u);
  EXPECT_EQ((*servers)[0].uuid(), "uuid-a");
  EXPECT_TRUE((*servers)[0].alive());
  EXPECT_EQ((*servers)[1].address(), "127.0.0.1:7002");
  EXPECT_EQ(AddServer("uuid-c"), 3u);
}

TEST_F(MembershipTest, AUuidIsTheDataDirectorysThatHoldsItsSecret) {
  RegisterServerRequest server;
  server.set_address("127.0.0.1:7001");
  server.set_uuid("uuid-a");
  server.set_identity_secret("secret-of-a");
  server.set_capacity_bytes(100);
  absl::StatusOr<uint32_t> a = membership_->Register(server);
  ASSERT_OK(a.status());
  // Another data directory (or someone who read the uuid in ListServers)
  // claims it, with another secret or none: refused, nothing changes.
  RegisterServerRequest impostor = server;
  impostor.set_address("127.0.0.1:6666");
  impostor.set_capacity_bytes(1 << 30);
  for (const char* secret : {"not-the-secret", ""}) {
    impostor.set_identity_secret(secret);
    absl::StatusOr<uint32_t> taken = membership_->Register(impostor);
    EXPECT_ERRNO(taken, EPERM);
    EXPECT_TRUE(absl::StrContains(taken.status().message(), "server.secret")) << taken.status();
  }
  auto stored = membership_->GetServer(*a);
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->address(), "127.0.0.1:7001");
  EXPECT_EQ((*stored)->capacity_bytes(), 100u);
  // The server itself, moved to another port, registers again at once.
  server.set_address("127.0.0.1:7009");
  EXPECT_EQ(membership_->Register(server).value_or(0), *a);
  EXPECT_EQ(membership_->GetServer(*a)->value().address(), "127.0.0.1:7009");
  // Listing never shows the secret.
  auto listed = membership_->ListServers();
  ASSERT_TRUE(listed.ok());
  EXPECT_FALSE(absl::StrContains((*listed)[0].DebugString(), "secret-of-a"));
}

TEST_F(MembershipTest, HeartbeatOfAnUnknownIdIsNotFound) {
  HeartbeatRequest heartbeat;
  heartbeat.set_server_id(7);
  absl::Status status = membership_->Heartbeat(heartbeat);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoFromStatus(status), ENOENT);
  heartbeat.set_server_id(0);
  EXPECT_EQ(membership_->Heartbeat(heartbeat).code(), absl::StatusCode::kNotFound);
}

TEST_F(MembershipTest, AliveMeansAHeartbeatWithinTheTimeout) {
  const uint32_t a = AddServer("uuid-a");
  const uint32_t b = AddServer("uuid-b");
  clock_.Advance(absl::Seconds(6));
  HeartbeatRequest heartbeat;
  heartbeat.set_server_id(b);
  heartbeat.set_capacity_bytes(555);
  ASSERT_OK(membership_->Heartbeat(heartbeat));
  clock_.Advance(absl::Seconds(5));  // a: 11 s since registering; b: 5 s
  auto alive = membership_->AliveServers();
  ASSERT_TRUE(alive.ok());
  ASSERT_EQ(alive->size(), 1u);
  EXPECT_EQ((*alive)[0].id(), b);
  EXPECT_EQ((*alive)[0].capacity_bytes(), 555u);
  auto server_a = membership_->GetServer(a);
  ASSERT_TRUE(server_a.ok() && server_a->has_value());
  EXPECT_FALSE((*server_a)->alive());
  EXPECT_FALSE(membership_->GetServer(99)->has_value());
  // Registering again revives it.
  AddServer("uuid-a");
  EXPECT_EQ(membership_->AliveServers()->size(), 2u);
}

TEST_F(MembershipTest, RegistrationInputIsValidated) {
  RegisterServerRequest request;
  request.set_uuid("u");
  request.set_address("no-port");
  EXPECT_ERRNO(membership_->Register(request), EINVAL);
  request.set_address("127.0.0.1:7001");
  request.set_uuid("");
  EXPECT_ERRNO(membership_->Register(request), EINVAL);
  request.set_uuid(std::string(1000, 'u'));
  EXPECT_ERRNO(membership_->Register(request), EINVAL);
  EXPECT_TRUE(membership_->ListServers()->empty());
}

// A data directory that is not an absolute path (of sane length) is
// dropped: the server registers, its clients read over TCP only.
TEST_F(MembershipTest, ABadDataDirectoryIsDroppedNotRefused) {
  RegisterServerRequest request;
  request.set_address("127.0.0.1:7001");
  request.set_uuid("uuid-relative");
  request.set_data_dir("relative/data");
  ASSERT_OK(membership_->Register(request).status());
  request.set_address("127.0.0.1:7002");
  request.set_uuid("uuid-long");
  request.set_data_dir("/" + std::string(5000, 'd'));
  ASSERT_OK(membership_->Register(request).status());
  auto servers = membership_->ListServers();
  ASSERT_TRUE(servers.ok());
  ASSERT_EQ(servers->size(), 2u);
  for (const ServerInfo& info : *servers) EXPECT_EQ(info.data_dir(), "") << info.uuid();
}

TEST_F(MembershipTest, TheDataDirectoryIsListed) {
  RegisterServerRequest request;
  request.set_uuid("uuid-a");
  request.set_address("127.0.0.1:7001");
  request.set_data_dir("/srv/ckptfs/data");
  ASSERT_OK(membership_->Register(request).status());
  auto servers = membership_->ListServers();
  ASSERT_TRUE(servers.ok());
  ASSERT_EQ(servers->size(), 1u);
  EXPECT_EQ((*servers)[0].data_dir(), "/srv/ckptfs/data");
}

TEST_F(MembershipTest, MembershipLivesInTheStore) {
  const uint32_t a = AddServer("uuid-a", 100, 0, "127.0.0.1:7001");
  AddServer("uuid-b");
  Reopen();
  auto servers = membership_->ListServers();
  ASSERT_TRUE(servers.ok());
  ASSERT_EQ(servers->size(), 2u);
  EXPECT_EQ((*servers)[0].address(), "127.0.0.1:7001");
  EXPECT_EQ(AddServer("uuid-a", 100, 0, "127.0.0.1:7001"), a);
  EXPECT_EQ(AddServer("uuid-new"), 3u);
  HeartbeatRequest heartbeat;
  heartbeat.set_server_id(a);
  EXPECT_OK(membership_->Heartbeat(heartbeat));
}

}  // namespace
}  // namespace ckptfs::meta
