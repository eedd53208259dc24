// The metadata side of repair and scrubbing, over the wire to an in-process
// MetaServer on a MemoryKvStore: MoveStripeServer (the move, its errors, an
// orphan's record moving along), the heartbeats' scrub reports and the
// repairer's last report in ClusterStatus, and GrpcMetaClient's calls of the
// two new RPCs, including a MoveStripeServer whose reply is lost and whose
// resend finds the stripe already moved.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/grpc_meta_client.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"
#include "proto/meta.grpc.pb.h"
#include "server/meta/keys.h"
#include "server/meta/memory_kv_store.h"
#include "server/meta/meta_server.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

std::vector<uint32_t> StripeOf(const Attr& attr) {
  return {attr.layout().stripe().begin(), attr.layout().stripe().end()};
}

class RepairServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = std::make_unique<MemoryKvStore>();
    store_ = store.get();
    MetaServer::Options options;
    options.listen = "127.0.0.1:0";
    options.default_replicas = 2;
    auto server = MetaServer::Start(options, std::move(store));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = MetaService::NewStub(channel_);
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

  // A file with two copies on the two servers registered first.
  Attr CreateFile(const std::string& name) {
    CreateRequest create;
    create.set_parent(kRootIno);
    create.set_name(name);
    create.set_mode(0644);
    CreateReply created;
    grpc::Status status = stub_->Create(Context().get(), create, &created);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return created.attr();
  }

  // MoveStripeServer over the wire: the errno (0 on success) and the reply.
  int Move(uint64_t ino, uint32_t from, uint32_t to, Attr* moved = nullptr) {
    MoveStripeServerRequest request;
    request.set_ino(ino);
    request.set_from_server_id(from);
    request.set_to_server_id(to);
    AttrReply reply;
    grpc::Status status = stub_->MoveStripeServer(Context().get(), request, &reply);
    if (moved != nullptr) *moved = reply.attr();
    return status.ok() ? 0 : ErrnoFromStatus(FromGrpcStatus(status, "MoveStripeServer"));
  }

  Attr Stat(uint64_t ino) {
    InodeRequest request;
    request.set_ino(ino);
    AttrReply reply;
    grpc::Status status = stub_->GetAttr(Context().get(), request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.attr();
  }

  ClusterStatusReply Status() {
    ClusterStatusReply reply;
    grpc::Status status = stub_->ClusterStatus(Context().get(), ClusterStatusRequest(), &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply;
  }

  void Heartbeat(uint32_t id, const ScrubReport* scrub) {
    HeartbeatRequest request;
    request.set_server_id(id);
    request.set_capacity_bytes(1 << 30);
    request.set_load_reported(true);
    if (scrub != nullptr) *request.mutable_scrub() = *scrub;
    Empty empty;
    grpc::Status status = stub_->Heartbeat(Context().get(), request, &empty);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }

  MemoryKvStore* store_ = nullptr;  // owned by server_
  std::unique_ptr<MetaServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<MetaService::Stub> stub_;
};

TEST_F(RepairServiceTest, MoveStripeServerReplacesTheServerAndASecondMoveIsStale) {
  const uint32_t a = Register("uuid-a");
  const uint32_t b = Register("uuid-b");
  const Attr file = CreateFile("model.pt");
  ASSERT_EQ(file.layout().stripe_size(), 2);
  const uint32_t c = Register("uuid-c");  // outside the file's stripe
  const std::vector<uint32_t> before = StripeOf(file);
  const uint32_t from = before[0];

  Attr moved;
  ASSERT_EQ(Move(file.ino(), from, c, &moved), 0);
  std::vector<uint32_t> expected = before;
  expected[0] = c;
  EXPECT_EQ(StripeOf(moved), expected);
  EXPECT_GT(moved.ctime_ns(), file.ctime_ns());
  EXPECT_EQ(moved.layout().replicas(), file.layout().replicas());
  EXPECT_EQ(moved.layout().chunk_size(), file.layout().chunk_size());
  EXPECT_EQ(StripeOf(Stat(file.ino())), expected);  // stored, not only answered
  EXPECT_TRUE((expected == std::vector<uint32_t>{c, a}) ||
              (expected == std::vector<uint32_t>{c, b}));

  // The same move again (a resend after a lost reply, another repairer):
  // the stripe no longer holds `from`.
  EXPECT_EQ(Move(file.ino(), from, c), ESTALE);
  EXPECT_EQ(StripeOf(Stat(file.ino())), expected);
}

TEST_F(RepairServiceTest, MoveStripeServerRefusesBadMovesAndChangesNothing) {
  Register("uuid-a");
  Register("uuid-b");
  const Attr file = CreateFile("model.pt");
  const uint32_t c = Register("uuid-c");
  const std::vector<uint32_t> stripe = StripeOf(file);
  ASSERT_EQ(stripe.size(), 2u);

  EXPECT_EQ(Move(file.ino(), stripe[0], 99), EINVAL);         // not registered
  EXPECT_EQ(Move(file.ino(), stripe[0], stripe[1]), EINVAL);  // already in the stripe
  EXPECT_EQ(Move(file.ino(), stripe[0], stripe[0]), EINVAL);  // from == to
  // `from` not in the stripe, `to` a registered server outside it.
  const uint32_t d = Register("uuid-d");
  EXPECT_EQ(Move(file.ino(), c, d), ESTALE);
  EXPECT_EQ(Move(12345, stripe[0], c), ENOENT);
  EXPECT_EQ(Move(kRootIno, stripe[0], c), EISDIR);

  MkdirRequest mkdir;
  mkdir.set_parent(kRootIno);
  mkdir.set_name("dir");
  mkdir.set_mode(0755);
  AttrReply dir;
  ASSERT_TRUE(stub_->Mkdir(Context().get(), mkdir, &dir).ok());
  EXPECT_EQ(Move(dir.attr().ino(), stripe[0], c), EISDIR);
  SymlinkRequest symlink;
  symlink.set_parent(kRootIno);
  symlink.set_name("link");
  symlink.set_target("model.pt");
  AttrReply link;
  ASSERT_TRUE(stub_->Symlink(Context().get(), symlink, &link).ok());
  EXPECT_EQ(Move(link.attr().ino(), stripe[0], c), EINVAL);

  const Attr after = Stat(file.ino());
  EXPECT_EQ(StripeOf(after), stripe);
  EXPECT_EQ(after.ctime_ns(), file.ctime_ns());
}

TEST_F(RepairServiceTest, MovingAnOrphanMovesItsReclamationRecord) {
  Register("uuid-a");
  Register("uuid-b");
  const Attr file = CreateFile("old.pt");
  const uint32_t c = Register("uuid-c");
  LookupRequest unlink;
  unlink.set_parent(kRootIno);
  unlink.set_name("old.pt");
  Empty empty;
  ASSERT_TRUE(stub_->Unlink(Context().get(), unlink, &empty).ok());

  const uint32_t from = file.layout().stripe(1);
  Attr moved;
  ASSERT_EQ(Move(file.ino(), from, c, &moved), 0);
  EXPECT_EQ(moved.nlink(), 0u);
  auto stored = store_->Get(OrphanKey(file.ino()));
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_TRUE(stored->has_value());
  OrphanRecord orphan;
  ASSERT_TRUE(orphan.ParseFromString((*stored)->value));
  EXPECT_EQ(std::vector<uint32_t>(orphan.layout().stripe().begin(), orphan.layout().stripe().end()),
            StripeOf(moved));
  EXPECT_EQ(orphan.layout().stripe(1), c);
}

TEST_F(RepairServiceTest, ClusterStatusCarriesEachServersLastScrubReport) {
  const uint32_t a = Register("uuid-a");
  const uint32_t b = Register("uuid-b");
  ScrubReport scrub;
  scrub.set_chunks_checked(1234);
  scrub.set_bytes_checked(uint64_t{5} << 30);
  scrub.set_corrupt_found(3);
  scrub.set_passes_completed(2);
  scrub.set_last_pass_end_ms(1700000000123);
  scrub.set_bytes_per_s_limit(64 << 20);
  Heartbeat(a, &scrub);
  Heartbeat(b, nullptr);

  ClusterStatusReply status = Status();
  ASSERT_EQ(status.servers_size(), 2);
  for (const ServerStatus& server : status.servers()) {
    if (server.info().id() == a) {
      ASSERT_TRUE(server.has_scrub());
      EXPECT_EQ(server.scrub().SerializeAsString(), scrub.SerializeAsString());
    } else {
      EXPECT_FALSE(server.has_scrub()) << "server " << server.info().id();
    }
  }

  // The last heartbeat's: one without a report clears it.
  Heartbeat(a, nullptr);
  status = Status();
  for (const ServerStatus& server : status.servers()) EXPECT_FALSE(server.has_scrub());
}

TEST_F(RepairServiceTest, ClusterStatusCarriesTheLastRepairReport) {
  ClusterStatusReply status = Status();
  EXPECT_FALSE(status.has_repair());
  EXPECT_EQ(status.repair_reported_ms(), 0);

  RepairReport first;
  first.set_repairer("host-a pid 1");
  first.set_files_checked(1);
  RepairReport second;
  second.set_repairer("host-a pid 1");
  second.set_passes_completed(4);
  second.set_pass_started_ms(1700000000000);
  second.set_files_total(10);
  second.set_files_checked(7);
  second.set_chunks_checked(70);
  second.set_copies_rebuilt(5);
  second.set_copies_moved(6);
  second.set_bytes_written(uint64_t{11} << 20);
  second.set_files_unrepairable(1);
  second.set_last_problem("inode 42: no good copy of chunk 3");
  Empty empty;
  for (const RepairReport* report : {&first, &second}) {
    ReportRepairRequest request;
    *request.mutable_report() = *report;
    ASSERT_TRUE(stub_->ReportRepair(Context().get(), request, &empty).ok());
  }
  const int64_t after_ms = absl::ToUnixMillis(absl::Now());

  status = Status();
  ASSERT_TRUE(status.has_repair());
  EXPECT_EQ(status.repair().SerializeAsString(), second.SerializeAsString());
  EXPECT_GT(status.repair_reported_ms(), 0);
  EXPECT_LE(status.repair_reported_ms(), after_ms);
  EXPECT_LE(status.repair_reported_ms(), status.now_ms());
}

TEST_F(RepairServiceTest, GrpcMetaClientMovesAndReports) {
  Register("uuid-a");
  Register("uuid-b");
  const Attr file = CreateFile("model.pt");
  const uint32_t c = Register("uuid-c");
  client::GrpcMetaClient meta(server_->address(), absl::Seconds(10), "");

  const uint32_t from = file.layout().stripe(0);
  absl::StatusOr<Attr> moved = meta.MoveStripeServer(file.ino(), from, c);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->layout().stripe(0), c);
  EXPECT_EQ(moved->ino(), file.ino());
  // A second move is the service's ESTALE, not a transport error.
  absl::StatusOr<Attr> again = meta.MoveStripeServer(file.ino(), from, c);
  EXPECT_EQ(ErrnoFromStatus(again.status()), ESTALE);
  EXPECT_FALSE(client::IsMetaTransportError(again.status()));
  EXPECT_EQ(ErrnoFromStatus(meta.MoveStripeServer(file.ino(), c, 99).status()), EINVAL);

  RepairReport report;
  report.set_repairer("me pid 2");
  report.set_copies_rebuilt(9);
  ASSERT_TRUE(meta.ReportRepair(report).ok());
  const ClusterStatusReply status = Status();
  EXPECT_EQ(status.repair().repairer(), "me pid 2");
  EXPECT_EQ(status.repair().copies_rebuilt(), 9u);
}

// A MetaService in front of a Namespace that applies MoveStripeServer and
// then, while `lose_replies` lasts, answers UNAVAILABLE without an errno, as
// gRPC does when the connection drops before the reply.
class LossyMoveService final : public MetaService::CallbackService {
 public:
  explicit LossyMoveService(Namespace* ns) : ns_(ns) {}

  grpc::ServerUnaryReactor* MoveStripeServer(grpc::CallbackServerContext* ctx,
                                             const MoveStripeServerRequest* request,
                                             AttrReply* reply) override {
    ++moves;
    absl::StatusOr<Attr> moved =
        ns_->MoveStripeServer(request->ino(), request->from_server_id(), request->to_server_id());
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (lose_replies.load() > 0) {
      --lose_replies;
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection lost"));
      return reactor;
    }
    if (moved.ok()) *reply->mutable_attr() = *moved;
    reactor->Finish(ToGrpcStatus(moved.status()));
    return reactor;
  }

  grpc::ServerUnaryReactor* GetAttr(grpc::CallbackServerContext* ctx, const InodeRequest* request,
                                    AttrReply* reply) override {
    absl::StatusOr<Attr> attr = ns_->GetAttr(request->ino());
    if (attr.ok()) *reply->mutable_attr() = *attr;
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(attr.status()));
    return reactor;
  }

  std::atomic<int> lose_replies{0};
  std::atomic<int> moves{0};

 private:
  Namespace* const ns_;
};

TEST_F(RepairServiceTest, AResentMoveThatFindsItsOwnMoveSucceeds) {
  Register("uuid-a");
  Register("uuid-b");
  const Attr file = CreateFile("model.pt");
  const uint32_t c = Register("uuid-c");
  const uint32_t d = Register("uuid-d");

  LossyMoveService lossy(&server_->ns());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&lossy);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_NE(port, 0);
  client::GrpcMetaClient meta(absl::StrCat("127.0.0.1:", port), absl::Seconds(10), "");

  // The first attempt moves and its reply is lost; the resend's ESTALE is
  // that move's success.
  const uint32_t from = file.layout().stripe(0);
  lossy.lose_replies = 1;
  absl::StatusOr<Attr> moved = meta.MoveStripeServer(file.ino(), from, c);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(lossy.moves.load(), 2);
  EXPECT_EQ(moved->layout().stripe(0), c);
  EXPECT_EQ(StripeOf(*moved), StripeOf(Stat(file.ino())));

  // Sent once, an ESTALE stays an ESTALE even though the stripe holds `to`
  // and not `from`: nothing was moved by this call.
  EXPECT_EQ(ErrnoFromStatus(meta.MoveStripeServer(file.ino(), d, c).status()), ESTALE);
  EXPECT_EQ(lossy.moves.load(), 3);

  // A resend whose stripe reads otherwise (moved on to `d` by someone else
  // before the resend): ESTALE.
  lossy.lose_replies = 1;
  ASSERT_TRUE(server_->ns().MoveStripeServer(file.ino(), c, d).ok());
  absl::StatusOr<Attr> stale = meta.MoveStripeServer(file.ino(), c, from);
  EXPECT_EQ(lossy.moves.load(), 5);
  EXPECT_EQ(ErrnoFromStatus(stale.status()), ESTALE) << stale.status();
  server->Shutdown();
}

}  // namespace
}  // namespace ckptfs::meta
