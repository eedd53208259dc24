// The checkpoint RPCs of a MetaServer on 127.0.0.1:0 through a real stub,
// with a fake storage server: many ranks blocked in CommitCheckpoint at once
// (long polls held by the service without a thread each), errors carrying
// their errno (an aborted checkpoint's abort_errno and reason), a failed
// write aborting the checkpoint through CommitWrite, a restart of the
// service while a rank waits, and no_wait arrivals beside one long poll.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"
#include "proto/meta.grpc.pb.h"
#include "server/meta/keys.h"
#include "server/meta/meta_server.h"
#include "tests/meta/fake_storage_server.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

class CheckpointServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartServer();
    RegisterServerRequest request;
    request.set_address(storage_.address());
    request.set_uuid("uuid-storage");
    request.set_capacity_bytes(1 << 30);
    RegisterServerReply reply;
    ASSERT_TRUE(stub_->RegisterServer(Context().get(), request, &reply).ok());
  }
  void TearDown() override { StopServer(); }

  void StartServer() {
    MetaServer::Options options;
    options.listen = "127.0.0.1:0";
    options.data_dir = dir_.path();
    options.reclaim_interval = absl::Milliseconds(50);
    auto server = MetaServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = MetaService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void StopServer() {
    stub_.reset();
    server_.reset();
  }

  static std::unique_ptr<grpc::ClientContext> Context(int seconds = 30) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
    return context;
  }

  uint64_t Mkdir(uint64_t parent, const std::string& name) {
    MkdirRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_mode(0755);
    AttrReply reply;
    grpc::Status status = stub_->Mkdir(Context().get(), request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.attr().ino();
  }

  grpc::Status Declare(uint64_t dir, uint32_t ranks, uint32_t timeout_s = 0,
                       CheckpointInfo* info = nullptr) {
    DeclareCheckpointRequest request;
    request.set_ino(dir);
    request.set_ranks(ranks);
    request.set_timeout_s(timeout_s);
    CheckpointInfo ignored;
    return stub_->DeclareCheckpoint(Context().get(), request, info ? info : &ignored);
  }

  grpc::Status Commit(uint64_t dir, uint32_t rank, CheckpointInfo* info, uint32_t wait_ms = 60000) {
    CommitCheckpointRequest request;
    request.set_ino(dir);
    request.set_rank(rank);
    request.set_wait_ms(wait_ms);
    return stub_->CommitCheckpoint(Context(120).get(), request, info);
  }

  // A no_wait arrival; a deadline far below a long poll's, so that one
  // held by the service fails the test.
  grpc::Status Arrive(uint64_t dir, uint32_t rank, CheckpointInfo* info) {
    CommitCheckpointRequest request;
    request.set_ino(dir);
    request.set_rank(rank);
    request.set_wait_ms(600000);  // ignored
    request.set_no_wait(true);
    return stub_->CommitCheckpoint(Context(20).get(), request, info);
  }

  CheckpointInfo Get(uint64_t dir) {
    InodeRequest request;
    request.set_ino(dir);
    CheckpointInfo info;
    grpc::Status status = stub_->GetCheckpoint(Context().get(), request, &info);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return info;
  }

  // Creates a file of `size` bytes, as a closed writer leaves it.
  uint64_t WriteFile(uint64_t parent, const std::string& name, uint64_t size) {
    CreateRequest create;
    create.set_parent(parent);
    create.set_name(name);
    create.set_mode(0644);
    create.set_writer_handle(99);
    CreateReply created;
    EXPECT_TRUE(stub_->Create(Context().get(), create, &created).ok());
    CommitWriteRequest close;
    close.set_ino(created.attr().ino());
    close.set_size(size);
    close.set_release_writer(99);
    AttrReply attr;
    EXPECT_TRUE(stub_->CommitWrite(Context().get(), close, &attr).ok());
    return created.attr().ino();
  }

  TempDir dir_;
  FakeStorageServer storage_;
  std::unique_ptr<MetaServer> server_;
  std::unique_ptr<MetaService::Stub> stub_;
};

TEST_F(CheckpointServiceTest, ManyRanksBlockInCommitAndReturnTogether) {
  constexpr uint32_t kRanks = 128;
  const uint64_t run = Mkdir(kRootIno, "run");
  const uint64_t ckpt = Mkdir(run, "step-1");
  CheckpointInfo declared;
  ASSERT_TRUE(Declare(ckpt, kRanks, 0, &declared).ok());
  EXPECT_EQ(declared.state(), PENDING);
  for (uint32_t i = 0; i < 8; ++i) WriteFile(ckpt, absl::StrCat("shard-", i), 1 << 20);
  std::vector<grpc::Status> statuses(kRanks);
  std::vector<CheckpointInfo> infos(kRanks);
  std::vector<std::thread> ranks;
  // All but the last rank wait in the service at once.
  for (uint32_t rank = 0; rank + 1 < kRanks; ++rank) {
    ranks.emplace_back([&, rank] { statuses[rank] = Commit(ckpt, rank, &infos[rank]); });
  }
  for (int i = 0; i < 6000 && Get(ckpt).arrived() < kRanks - 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Get(ckpt).arrived(), kRanks - 1);
  EXPECT_EQ(Get(ckpt).state(), PENDING);
  statuses[kRanks - 1] = Commit(ckpt, kRanks - 1, &infos[kRanks - 1]);
  for (std::thread& thread : ranks) thread.join();
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << rank << ": " << statuses[rank].error_message();
    EXPECT_EQ(infos[rank].state(), COMMITTED) << rank;
  }
  EXPECT_EQ(storage_.Count(data::SYNC, true), 1u);
  ListCheckpointsReply list;
  InodeRequest request;
  request.set_ino(run);
  ASSERT_TRUE(stub_->ListCheckpoints(Context().get(), request, &list).ok());
  EXPECT_EQ(list.latest(), "step-1");
  ASSERT_EQ(list.checkpoints_size(), 1);
  EXPECT_EQ(list.checkpoints(0).files(), 8u);
  EXPECT_EQ(list.checkpoints(0).bytes(), 8u << 20);
  // Removal through the RPC: with an expected inode or state that is not
  // the entry's, ESTALE and nothing removed (what `ckpt gc` relies on when
  // a retried step reuses a name); then as it is.
  RemoveCheckpointRequest remove;
  remove.set_parent(run);
  remove.set_name("step-1");
  remove.set_expected_ino(list.checkpoints(0).ino() + 1000);
  remove.set_expected_state(COMMITTED);
  Empty empty;
  grpc::Status refused = stub_->RemoveCheckpoint(Context().get(), remove, &empty);
  EXPECT_EQ(ErrnoFromStatus(FromGrpcStatus(refused, "RemoveCheckpoint")), ESTALE)
      << refused.error_message();
  remove.set_expected_ino(list.checkpoints(0).ino());
  remove.set_expected_state(ABORTED);
  refused = stub_->RemoveCheckpoint(Context().get(), remove, &empty);
  EXPECT_EQ(ErrnoFromStatus(FromGrpcStatus(refused, "RemoveCheckpoint")), ESTALE)
      << refused.error_message();
  ASSERT_TRUE(stub_->ListCheckpoints(Context().get(), request, &list).ok());
  ASSERT_EQ(list.checkpoints_size(), 1);
  remove.set_expected_state(COMMITTED);
  ASSERT_TRUE(stub_->RemoveCheckpoint(Context().get(), remove, &empty).ok());
  ASSERT_TRUE(stub_->ListCheckpoints(Context().get(), request, &list).ok());
  EXPECT_EQ(list.checkpoints_size(), 0);
  EXPECT_EQ(list.latest(), "");
}

TEST_F(CheckpointServiceTest, NoWaitArrivalsShareOneLongPoll) {
  // One client's ranks: rank 0 holds the long poll, the others arrive.
  const uint64_t run = Mkdir(kRootIno, "run");
  const uint64_t ckpt = Mkdir(run, "step-1");
  ASSERT_TRUE(Declare(ckpt, 3).ok());
  WriteFile(ckpt, "model.pt", 4096);
  CheckpointInfo info;
  EXPECT_EQ(Arrive(ckpt, 3, &info).error_details(), absl::StrCat(EINVAL));
  grpc::Status polled;
  CheckpointInfo outcome;
  std::thread poller([&] { polled = Commit(ckpt, 0, &outcome); });
  for (int i = 0; i < 6000 && Get(ckpt).arrived() < 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  grpc::Status status = Arrive(ckpt, 1, &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.state(), PENDING);
  EXPECT_EQ(info.arrived(), 2u);
  status = Arrive(ckpt, 2, &info);  // the last arrival
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(info.state(), ABORTED);
  poller.join();
  ASSERT_TRUE(polled.ok()) << polled.error_message();
  EXPECT_EQ(outcome.state(), COMMITTED);
  EXPECT_EQ(outcome.arrived(), 3u);
  status = Arrive(ckpt, 1, &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.state(), COMMITTED);
}

TEST_F(CheckpointServiceTest, ErrorsCarryTheirErrno) {
  const uint64_t ckpt = Mkdir(kRootIno, "ckpt");
  grpc::Status status = Declare(ckpt, 0);
  EXPECT_EQ(status.error_details(), absl::StrCat(EINVAL));
  ASSERT_TRUE(Declare(ckpt, 2).ok());
  EXPECT_EQ(Declare(ckpt, 3).error_details(), absl::StrCat(EINVAL));
  CheckpointInfo info;
  EXPECT_EQ(Commit(ckpt, 2, &info).error_details(), absl::StrCat(EINVAL));
  EXPECT_EQ(Commit(Mkdir(kRootIno, "plain"), 0, &info).error_details(), absl::StrCat(EINVAL));
  InodeRequest get;
  get.set_ino(kRootIno);
  EXPECT_EQ(stub_->GetCheckpoint(Context().get(), get, &info).error_details(),
            absl::StrCat(EINVAL));
  SetXattrRequest set;
  set.set_ino(ckpt);
  set.set_name("user.ckptfs.ranks");
  set.set_value("2");
  Empty empty;
  EXPECT_EQ(stub_->SetXattr(Context().get(), set, &empty).error_details(), absl::StrCat(EINVAL));
  // A long poll that runs out answers PENDING.
  status = Commit(ckpt, 0, &info, /*wait_ms=*/30);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.state(), PENDING);
  EXPECT_EQ(info.arrived(), 1u);
}

TEST_F(CheckpointServiceTest, AnAbortedCommitFailsWithItsErrnoAndReason) {
  const uint64_t run = Mkdir(kRootIno, "run");
  const uint64_t ckpt = Mkdir(run, "ckpt");
  ASSERT_TRUE(Declare(ckpt, 2, /*timeout_s=*/1).ok());
  const uint64_t file = WriteFile(ckpt, "a.pt", 4096);
  CheckpointInfo info;
  grpc::Status status = Commit(ckpt, 0, &info);
  EXPECT_EQ(status.error_details(), absl::StrCat(ETIMEDOUT));
  EXPECT_TRUE(absl::StrContains(status.error_message(), "timed out")) << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "missing rank 1"))
      << status.error_message();
  EXPECT_EQ(Commit(ckpt, 1, &info).error_details(), absl::StrCat(ETIMEDOUT));
  EXPECT_EQ(Get(ckpt).state(), ABORTED);
  // Its chunks are reclaimed promptly: the reclaimer trims the file.
  for (int i = 0; i < 6000 && storage_.Count(data::TRIM) == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GE(storage_.Count(data::TRIM), 1u);
  bool trimmed = false;
  for (const data::RequestHeader& request : storage_.requests()) {
    if (request.op() == data::TRIM && request.ino() == file) trimmed = true;
  }
  EXPECT_TRUE(trimmed);
}

TEST_F(CheckpointServiceTest, AFailedWriteAbortsThePendingCheckpoint) {
  const uint64_t ckpt = Mkdir(kRootIno, "ckpt");
  ASSERT_TRUE(Declare(ckpt, 2).ok());
  CreateRequest create;
  create.set_parent(ckpt);
  create.set_name("a.pt");
  create.set_mode(0644);
  create.set_writer_handle(5);
  CreateReply created;
  ASSERT_TRUE(stub_->Create(Context().get(), create, &created).ok());
  CommitWriteRequest close;
  close.set_ino(created.attr().ino());
  close.set_size(100);
  close.set_release_writer(5);
  close.set_failed(true);
  AttrReply attr;
  ASSERT_TRUE(stub_->CommitWrite(Context().get(), close, &attr).ok());
  const CheckpointInfo info = Get(ckpt);
  EXPECT_EQ(info.state(), ABORTED);
  EXPECT_EQ(info.abort_errno(), EIO);
  CheckpointInfo reply;
  EXPECT_EQ(Commit(ckpt, 0, &reply).error_details(), absl::StrCat(EIO));
}

TEST_F(CheckpointServiceTest, ARestartWhileARankWaits) {
  const uint64_t run = Mkdir(kRootIno, "run");
  const uint64_t ckpt = Mkdir(run, "ckpt");
  ASSERT_TRUE(Declare(ckpt, 2).ok());
  WriteFile(ckpt, "a.pt", 1000);
  grpc::Status waited;
  std::thread rank0([&] {
    CheckpointInfo info;
    waited = Commit(ckpt, 0, &info);
  });
  for (int i = 0; i < 6000 && Get(ckpt).arrived() < 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(Get(ckpt).arrived(), 1u);
  StopServer();
  rank0.join();
  // Told to retry: UNAVAILABLE, no errno.
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE) << waited.error_message();
  EXPECT_EQ(waited.error_details(), "");
  StartServer();
  EXPECT_EQ(Get(ckpt).arrived(), 1u);  // rank 0's arrival survived
  CheckpointInfo info;
  ASSERT_TRUE(Commit(ckpt, 1, &info).ok());
  EXPECT_EQ(info.state(), COMMITTED);
  ASSERT_TRUE(Commit(ckpt, 0, &info).ok());  // the retry
  EXPECT_EQ(info.state(), COMMITTED);
}

}  // namespace
}  // namespace ckptfs::meta
