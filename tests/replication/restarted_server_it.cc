// A storage server that restarted cannot confirm a sync of writes its
// earlier run acknowledged: whatever that run had not synced lived in a page
// cache that a reboot (or a new empty server started under the old identity
// and address) does not have. Real ckptfs-meta and ckptfs-storage processes
// (LocalCluster) and libckptfs Clients, over TCP and with the chunk files
// written in place (local writes, then ADOPT). The restart is a kill -9
// followed by the removal of the chunk files written since the last sync,
// which is what the lost page cache leaves; then the server starts again on
// the same address and data directory.
//   - a checkpoint whose files a restarted server took aborts with EIO,
//     naming the server, and `latest` keeps naming the previous one;
//   - an fsync of a file whose chunks a restarted server took fails with EIO;
//   - a checkpoint whose files were fsynced before a server restarted (its
//     data durable) commits.
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "tests/replication/replication_support.h"

namespace ckptfs::replication {
namespace {

// A pattern of `n` bytes, distinct per seed.
std::string Bytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 16);
  }
  return s;
}

class RestartedServerTest : public ReplicationTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool local_writes() const { return GetParam(); }

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartCluster(4, 1));
    if (local_writes()) {
      client::ClientOptions options;
      options.meta_address = cluster_->meta_address();
      options.local_writes = true;
      options.rpc_timeout = absl::Seconds(10);
      options.data_timeout = absl::Seconds(10);
      auto client = client::Client::Connect(options);
      ASSERT_TRUE(client.ok()) << client.status();
      client_ = *std::move(client);
    }
  }

  // The index of a storage server holding chunks of `ino`.
  int HolderOf(uint64_t ino) {
    for (int i = 0; i < cluster_->storage_servers(); ++i) {
      if (std::filesystem::exists(absl::StrCat(cluster_->storage_dir(i), "/chunks/", ino))) {
        return i;
      }
    }
    ADD_FAILURE() << "no storage server holds chunks of inode " << ino;
    return 0;
  }

  // Storage server `i` loses power: killed, the chunks of `ino` (written
  // since its last sync) gone, started again on its address.
  void LosePower(int i, uint64_t ino) {
    ASSERT_TRUE(cluster_->StopStorage(i, SIGKILL).ok());
    std::error_code error;
    std::filesystem::remove_all(absl::StrCat(cluster_->storage_dir(i), "/chunks/", ino), error);
    ASSERT_FALSE(error) << error.message();
    ASSERT_TRUE(cluster_->StartStorage(i).ok());
    ASSERT_TRUE(cluster_->WaitServersAlive(cluster_->storage_servers()).ok());
  }
};

TEST_P(RestartedServerTest, ACommitAbortsWhenAServerRestartedSinceItsWrites) {
  auto run = client_->MkdirAll("/d/run", 0755);
  ASSERT_TRUE(run.ok()) << run.status();
  auto step1 = client_->MkdirAll("/d/run/step_1", 0755);
  ASSERT_TRUE(step1.ok()) << step1.status();
  ASSERT_TRUE(client_->DeclareCheckpoint(step1->ino(), 1).ok());
  ASSERT_TRUE(WriteFile(*client_, step1->ino(), "rank_0.pt", Bytes(4 * kChunk, 1)).ok());
  auto committed = client_->CommitCheckpoint(step1->ino(), 0);
  ASSERT_TRUE(committed.ok()) << committed.status();

  auto step2 = client_->MkdirAll("/d/run/step_2", 0755);
  ASSERT_TRUE(step2.ok()) << step2.status();
  ASSERT_TRUE(client_->DeclareCheckpoint(step2->ino(), 1).ok());
  auto file = WriteFile(*client_, step2->ino(), "rank_0.pt", Bytes(4 * kChunk, 2));
  ASSERT_TRUE(file.ok()) << file.status();
  const int victim = HolderOf(file->ino());
  ASSERT_NO_FATAL_FAILURE(LosePower(victim, file->ino()));

  auto outcome = client_->CommitCheckpoint(step2->ino(), 0);
  EXPECT_FALSE(outcome.ok()) << "committed a checkpoint whose chunks storage server "
                             << cluster_->storage_address(victim) << " lost";
  EXPECT_EQ(ErrnoFromStatus(outcome.status()), EIO) << outcome.status();
  EXPECT_NE(outcome.status().message().find(cluster_->storage_address(victim)),
            absl::string_view::npos)
      << "the reason should name the server: " << outcome.status();
  auto info = client_->GetCheckpoint(step2->ino());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state(), meta::ABORTED);
  auto listed = client_->ListCheckpoints(run->ino());
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->latest(), "step_1");
}

TEST_P(RestartedServerTest, AnFsyncAfterAServerRestartFailsWithEio) {
  auto created = client_->Create(dir_, "f", 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string data = Bytes(4 * kChunk, 3);
  auto wrote = created->file->Write(0, data.data(), data.size());
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  ASSERT_TRUE(created->file->Flush().ok());  // every chunk acknowledged
  const uint64_t ino = created->attr.ino();
  ASSERT_NO_FATAL_FAILURE(LosePower(HolderOf(ino), ino));

  absl::Status synced = created->file->Fsync();
  EXPECT_EQ(ErrnoFromStatus(synced), EIO) << "fsync after the restart: " << synced;
  // Nor does a second try confirm what the first could not.
  EXPECT_EQ(ErrnoFromStatus(created->file->Fsync()), EIO);
  (void)created->file->Close();
}

// What an fsync made durable survives a restart, so the checkpoint's
// commit must not hold the restart against it.
TEST_P(RestartedServerTest, ACheckpointFsyncedBeforeARestartCommits) {
  auto run = client_->MkdirAll("/d/run", 0755);
  ASSERT_TRUE(run.ok()) << run.status();
  auto step = client_->MkdirAll("/d/run/step_1", 0755);
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_TRUE(client_->DeclareCheckpoint(step->ino(), 1).ok());
  auto created =
      client_->Create(step->ino(), "rank_0.pt", 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string data = Bytes(4 * kChunk, 4);
  ASSERT_TRUE(created->file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(created->file->Fsync().ok());
  ASSERT_TRUE(created->file->Close().ok());
  const int holder = HolderOf(created->attr.ino());
  ASSERT_TRUE(cluster_->StopStorage(holder, SIGKILL).ok());
  ASSERT_TRUE(cluster_->StartStorage(holder).ok());
  ASSERT_TRUE(cluster_->WaitServersAlive(cluster_->storage_servers()).ok());

  auto committed = client_->CommitCheckpoint(step->ino(), 0);
  EXPECT_TRUE(committed.ok()) << "a checkpoint fsynced before the restart of storage server "
                              << cluster_->storage_address(holder)
                              << " did not commit: " << committed.status();
}

INSTANTIATE_TEST_SUITE_P(Writes, RestartedServerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "LocalWrites" : "Tcp";
                         });

}  // namespace
}  // namespace ckptfs::replication
