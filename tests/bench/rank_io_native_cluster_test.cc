// NativeRankIo against a real cluster (LocalCluster: ckptfs-meta and four
// ckptfs-storage processes on 127.0.0.1): every workload saved by several
// ranks at once through one shared Client, finalized, loaded back and
// verified, and a damaged byte caught.
#include <fcntl.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "bench/rank_io.h"
#include "bench/workload.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"

namespace ckptfs::bench {
namespace {

class NativeClusterTest : public ::testing::TestWithParam<WorkloadKind> {
 protected:
  static void SetUpTestSuite() {
    auto cluster = ckptfs::testing::LocalCluster::Start();
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    client::ClientOptions options;
    options.meta_address = cluster_->meta_address();
    auto client = client::Client::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = client->release();
  }
  static void TearDownTestSuite() {
    delete client_;
    client_ = nullptr;
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (client_ == nullptr) GTEST_SKIP() << "no cluster";
  }

  static ckptfs::testing::LocalCluster* cluster_;
  static client::Client* client_;
};

ckptfs::testing::LocalCluster* NativeClusterTest::cluster_ = nullptr;
client::Client* NativeClusterTest::client_ = nullptr;

TEST_P(NativeClusterTest, RanksSaveAndLoadThroughOneClient) {
  WorkloadSpec spec;
  spec.kind = GetParam();
  spec.ranks = 4;
  spec.bytes_per_rank = (6 << 20) + 12345;
  spec.tensor_bytes = 2 << 20;
  const std::string root = std::string("/bench-") + std::string(WorkloadKindName(spec.kind));
  std::unique_ptr<RankIo> control = MakeNativeRankIo(client_, root);
  ASSERT_TRUE(control->MakeDirs("step").ok());

  std::vector<absl::Status> results(spec.ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < spec.ranks; ++rank) {
    threads.emplace_back([&, rank] {
      std::unique_ptr<RankIo> io = MakeNativeRankIo(client_, root);
      results[rank] = SaveRank(*io, spec, rank, "step", nullptr).status();
    });
  }
  for (std::thread& t : threads) t.join();
  threads.clear();
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(FinalizeSave(*control, spec, "step", nullptr).ok());

  for (int rank = 0; rank < spec.ranks; ++rank) {
    threads.emplace_back([&, rank] {
      std::unique_ptr<RankIo> io = MakeNativeRankIo(client_, root);
      results[rank] = LoadRank(*io, spec, rank, "step", nullptr).status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;

  // One changed byte in the middle of rank 2's file is named.
  const std::string file = "step/" + RankFiles(spec, 2)[0];
  auto opened = client_->OpenPath(root + "/" + file, O_WRONLY, 0);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE((*opened)->Write(3 << 20, "?", 1).ok());
  ASSERT_TRUE((*opened)->Close().ok());
  absl::Status damaged = LoadRank(*control, spec, 2, "step", nullptr).status();
  EXPECT_TRUE(absl::IsDataLoss(damaged)) << damaged;
  EXPECT_NE(damaged.message().find("offset 3145728"), std::string::npos) << damaged;
  EXPECT_TRUE(control->RemoveTree("").ok());
}

INSTANTIATE_TEST_SUITE_P(Kinds, NativeClusterTest,
                         ::testing::Values(WorkloadKind::kRaw, WorkloadKind::kTorch,
                                           WorkloadKind::kDcp),
                         [](const ::testing::TestParamInfo<WorkloadKind>& info) {
                           return std::string(WorkloadKindName(info.param));
                         });

}  // namespace
}  // namespace ckptfs::bench
