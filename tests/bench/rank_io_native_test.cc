// Tests of NativeRankIo over a Client on the metadata service in-process and
// the in-memory chunk transport of client/testing/ (no daemons): the RankIo
// calls, and every workload saved, finalized and loaded back through it.
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "bench/rank_io.h"
#include "bench/workload.h"
#include "client/client.h"
#include "client/testing/fake_chunk_transport.h"
#include "client/testing/in_process_meta.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

class NativeRankIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client::testing::InProcessMetaService::Options service_options;
    service_options.storage_servers = 3;
    service_options.default_chunk_size = 256 * 1024;
    auto service = client::testing::InProcessMetaService::Start(service_options);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
    client::ClientOptions options;
    options.io_threads = 4;
    client_ = client::Client::CreateWithServices(
        options, service_->NewClient(), std::make_unique<client::testing::FakeChunkTransport>());
    ASSERT_TRUE(client_->MkdirAll("/bench", 0755).ok());
    io_ = MakeNativeRankIo(client_.get(), "/bench");
  }

  void TearDown() override { io_.reset(); }

  std::string Slurp(const std::string& path) {
    absl::StatusOr<int> h = io_->OpenRead(path);
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok()) return "";
    std::string out;
    char buf[65536];
    while (true) {
      absl::StatusOr<size_t> n = io_->Read(*h, buf, sizeof(buf));
      EXPECT_TRUE(n.ok()) << n.status();
      if (!n.ok() || *n == 0) break;
      out.append(buf, *n);
    }
    EXPECT_TRUE(io_->Close(*h).ok());
    return out;
  }

  void Put(const std::string& path, const std::string& data) {
    absl::StatusOr<int> h = io_->Create(path);
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_TRUE(io_->Write(*h, data.data(), data.size()).ok());
    ASSERT_TRUE(io_->Fsync(*h).ok());
    ASSERT_TRUE(io_->Close(*h).ok());
  }

  std::unique_ptr<client::testing::InProcessMetaService> service_;  // outlives client_
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<RankIo> io_;
};

TEST_F(NativeRankIoTest, FileCallsUnderTheRoot) {
  ASSERT_TRUE(io_->MakeDirs("step/sub").ok());
  EXPECT_TRUE(io_->MakeDirs("step/sub").ok());
  const std::string data(700 * 1024 + 5, 'q');
  Put("step/sub/f", data);
  Put("step/sub/f2", "short");
  Put("step/sub/f2", "new");  // Create truncates
  EXPECT_EQ(Slurp("step/sub/f"), data);
  EXPECT_EQ(Slurp("/step/sub/f2"), "new");
  EXPECT_TRUE(client_->LookupPath("/bench/step/sub/f").ok());  // really under the root

  ASSERT_TRUE(io_->Rename("step/sub/f", "step/sub/f2").ok());
  EXPECT_EQ(Slurp("step/sub/f2"), data);
  EXPECT_EQ(ErrnoFromStatus(io_->OpenRead("step/sub/f").status()), ENOENT);

  absl::Status set = io_->SetXattr("step", "user.bench.x", "v");
  ASSERT_TRUE(set.ok()) << set;
  absl::StatusOr<std::string> value = io_->GetXattr("step", "user.bench.x");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "v");

  absl::Status unlinked = io_->Unlink("step/nothing");
  EXPECT_TRUE(absl::IsNotFound(unlinked)) << unlinked;
  EXPECT_NE(unlinked.message().find("/bench/step/nothing"), std::string::npos) << unlinked;
  ASSERT_TRUE(io_->Unlink("step/sub/f2").ok());

  Put("step/sub/g", "g");
  ASSERT_TRUE(io_->MakeDirs("step/sub/deeper").ok());
  Put("step/sub/deeper/h", "h");
  ASSERT_TRUE(io_->RemoveTree("step").ok());
  EXPECT_EQ(ErrnoFromStatus(client_->LookupPath("/bench/step").status()), ENOENT);
  EXPECT_TRUE(io_->RemoveTree("step").ok());
  EXPECT_EQ(ErrnoFromStatus(io_->Close(12345)), EBADF);
}

class NativeWorkloadTest : public NativeRankIoTest,
                           public ::testing::WithParamInterface<WorkloadKind> {};

TEST_P(NativeWorkloadTest, SavesFinalizesAndLoadsVerified) {
  WorkloadSpec spec;
  spec.kind = GetParam();
  spec.ranks = 3;
  spec.bytes_per_rank = (1 << 20) + 4096 + 10;
  spec.tensor_bytes = 300 * 1024;
  spec.io_size = 128 * 1024;
  ASSERT_TRUE(io_->MakeDirs("ckpt").ok());
  for (int rank = 0; rank < spec.ranks; ++rank) {
    absl::StatusOr<RankTimes> saved = SaveRank(*io_, spec, rank, "ckpt", nullptr);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(saved->bytes, RankFileBytes(spec));
  }
  ASSERT_TRUE(FinalizeSave(*io_, spec, "ckpt", nullptr).ok());
  for (int rank = 0; rank < spec.ranks; ++rank) {
    absl::StatusOr<RankTimes> loaded = LoadRank(*io_, spec, rank, "ckpt", nullptr);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->bytes, RankFileBytes(spec) + MetadataFileBytes(spec));
    EXPECT_GT(loaded->first_byte_ns, 0);
  }
  // A wrong shard's bytes are caught through this target too.
  const std::vector<std::string> files0 = RankFiles(spec, 0);
  const std::vector<std::string> files1 = RankFiles(spec, 1);
  ASSERT_TRUE(io_->Rename("ckpt/" + files1[0], "ckpt/" + files0[0]).ok());
  absl::StatusOr<RankTimes> wrong = LoadRank(*io_, spec, 0, "ckpt", nullptr);
  EXPECT_TRUE(absl::IsDataLoss(wrong.status())) << wrong.status();
}

INSTANTIATE_TEST_SUITE_P(Kinds, NativeWorkloadTest,
                         ::testing::Values(WorkloadKind::kRaw, WorkloadKind::kTorch,
                                           WorkloadKind::kDcp),
                         [](const ::testing::TestParamInfo<WorkloadKind>& info) {
                           return std::string(WorkloadKindName(info.param));
                         });

}  // namespace
}  // namespace ckptfs::bench
