// The fixture of the replication integration tests: a LocalCluster (real
// ckptfs-meta and ckptfs-storage processes on loopback) started with
// --replicas=N, libckptfs Clients on it, and helpers that find a chunk's
// copies on the storage servers' disks (storage_dir(i)/chunks/<ino>/<i>).
//
// Thread-safety: the fixture belongs to one test; Connect()ed Clients are
// thread-safe, so storm writers may share the cluster.
#ifndef CKPTFS_TESTS_REPLICATION_REPLICATION_SUPPORT_H_
#define CKPTFS_TESTS_REPLICATION_REPLICATION_SUPPORT_H_

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/file.h"
#include "client/layout.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::replication {

// Small chunks: many chunks, and so every placement, in little data.
inline constexpr uint32_t kChunk = 64 * 1024;

inline ::testing::AssertionResult SameBytes(const std::string& got, const std::string& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return ::testing::AssertionFailure() << "got " << got.size() << " bytes, want " << want.size()
                                       << "; first difference at byte " << i;
}

class ReplicationTest : public ::testing::Test {
 protected:
  // Starts `servers` storage servers and a service with --replicas=`replicas`
  // (and a short server timeout, so that a killed server is seen down in
  // seconds), then a Client and directory /d with 64 KiB chunks.
  // `storage_flags` go to every storage server.
  void StartCluster(int servers, int replicas, std::vector<std::string> storage_flags = {}) {
    ckptfs::testing::LocalClusterOptions options;
    options.storage_servers = servers;
    options.storage_flags = std::move(storage_flags);
    options.meta_flags = {absl::StrCat("--replicas=", replicas), "--server_timeout_s=3"};
    auto cluster = ckptfs::testing::LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    client_ = Connect();
    ASSERT_NE(client_, nullptr);
    auto dir = client_->MkdirAll("/d", 0755);
    ASSERT_TRUE(dir.ok()) << dir.status();
    ASSERT_TRUE(
        client_->SetXattr(dir->ino(), "user.ckptfs.chunk_size", std::to_string(kChunk), 0).ok());
    dir_ = dir->ino();
  }

  void TearDown() override {
    client_.reset();
    if (HasFailure() && cluster_ != nullptr) std::cerr << cluster_->DescribeLogs();
    cluster_.reset();  // stops every process and mount
  }

  std::unique_ptr<client::Client> Connect() {
    client::ClientOptions options;
    options.meta_address = cluster_->meta_address();
    options.rpc_timeout = absl::Seconds(10);
    options.data_timeout = absl::Seconds(10);
    options.io_threads = 8;
    auto client = client::Client::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Creates `name` in `parent` and writes `data` in 100,000-byte writes;
  // returns the first error of create, write or close.
  static absl::StatusOr<meta::Attr> WriteFile(client::Client& client, uint64_t parent,
                                              const std::string& name, const std::string& data) {
    auto created = client.Create(parent, name, 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC);
    if (!created.ok()) return created.status();
    for (size_t done = 0; done < data.size();) {
      const size_t n = std::min<size_t>(100000, data.size() - done);
      auto wrote = created->file->Write(done, data.data() + done, n);
      if (!wrote.ok()) {
        (void)created->file->Close();
        return wrote.status();
      }
      done += n;
    }
    if (absl::Status closed = created->file->Close(); !closed.ok()) return closed;
    return created->attr;
  }

  // The whole file, read through `client`.
  static absl::StatusOr<std::string> ReadFile(client::Client& client, uint64_t ino) {
    auto file = client.Open(ino, O_RDONLY);
    if (!file.ok()) return file.status();
    std::string out((*file)->size(), '\0');
    size_t done = 0;
    while (done < out.size()) {
      auto n = (*file)->Read(done, out.data() + done, std::min<size_t>(out.size() - done, 300000));
      if (!n.ok()) {
        (void)(*file)->Close();
        return n.status();
      }
      if (*n == 0) break;
      done += *n;
    }
    out.resize(done);
    if (absl::Status closed = (*file)->Close(); !closed.ok()) return closed;
    return out;
  }

  // Storage server id -> its index in the LocalCluster (by address).
  std::map<uint32_t, int> ServerIndexes() {
    std::map<uint32_t, int> indexes;
    auto servers = client_->ListServers();
    EXPECT_TRUE(servers.ok()) << servers.status();
    if (!servers.ok()) return indexes;
    for (const meta::ServerInfo& s : servers->servers()) {
      for (int i = 0; i < cluster_->storage_servers(); ++i) {
        if (cluster_->storage_address(i) == s.address()) indexes[s.id()] = i;
      }
    }
    return indexes;
  }

  std::string ChunkPath(int server_index, uint64_t ino, uint64_t chunk) const {
    return absl::StrCat(cluster_->storage_dir(server_index), "/chunks/", ino, "/", chunk);
  }
  bool HasChunkFile(int server_index, uint64_t ino, uint64_t chunk) const {
    struct stat st;
    return ::stat(ChunkPath(server_index, ino, chunk).c_str(), &st) == 0;
  }

  std::unique_ptr<ckptfs::testing::LocalCluster> cluster_;
  std::unique_ptr<client::Client> client_;
  uint64_t dir_ = 0;
};

}  // namespace ckptfs::replication

#endif  // CKPTFS_TESTS_REPLICATION_REPLICATION_SUPPORT_H_
