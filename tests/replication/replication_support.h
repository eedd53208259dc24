// The fixture of the replication integration tests: a LocalCluster (real
// ckptfs-meta and ckptfs-storage processes on loopback) started with
// --replicas=N, libckptfs Clients on it, and helpers that find a chunk's
// copies on the storage servers' disks (storage_dir(i)/chunks/<ino>/<i>),
// read every copy of a file through the data protocol, wait for the
// service's view of which servers are alive, and run a save storm with a
// storage server killed in its middle.
//
// Thread-safety: the fixture belongs to one test; Connect()ed Clients are
// thread-safe, so storm writers may share the cluster.
#ifndef CKPTFS_TESTS_REPLICATION_REPLICATION_SUPPORT_H_
#define CKPTFS_TESTS_REPLICATION_REPLICATION_SUPPORT_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/blocking_chunk_transport.h"
#include "client/client.h"
#include "client/file.h"
#include "client/grpc_meta_client.h"
#include "client/layout.h"
#include "common/errno_status.h"
#include "common/placement.h"
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

  // A Client of the cluster; by default it reads over TCP, the path of
  // every remote node (with `local_reads`, the chunk files of the live
  // servers in place: client/local_chunk_transport.h).
  std::unique_ptr<client::Client> Connect(bool local_reads = false) {
    client::ClientOptions options;
    options.meta_address = cluster_->meta_address();
    options.local_reads = local_reads;
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

  // Waits until the service sees exactly the servers `alive` (by id) alive.
  void WaitAlive(const std::set<uint32_t>& alive) {
    std::set<uint32_t> now;
    for (int i = 0; i < 300; ++i) {
      auto servers = client_->ListServers();
      ASSERT_TRUE(servers.ok()) << servers.status();
      now.clear();
      for (const meta::ServerInfo& s : servers->servers()) {
        if (s.alive()) now.insert(s.id());
      }
      if (now == alive) return;
      absl::SleepFor(absl::Milliseconds(100));
    }
    FAIL() << "the service never saw the expected servers alive";
  }

  // Every copy (or erasure-coded fragment) of every chunk of `ino`, as the
  // server its layout names returns it: per chunk, server id -> bytes; a
  // failed read is recorded as "!" and its errno.
  std::vector<std::map<uint32_t, std::string>> ReadEveryCopy(uint64_t ino) {
    std::vector<std::map<uint32_t, std::string>> all;
    auto attr = client_->GetAttr(ino);
    EXPECT_TRUE(attr.ok()) << attr.status();
    if (!attr.ok()) return all;
    client::GrpcMetaClient meta(cluster_->meta_address(), absl::Seconds(10),
                                cluster_->credential());
    client::BlockingChunkTransport transport(&meta, absl::Seconds(10), cluster_->credential());
    absl::Status listed = transport.RefreshServers();
    EXPECT_TRUE(listed.ok()) << listed;
    const meta::Layout& layout = attr->layout();
    const uint64_t chunks = client::ChunkCount(attr->size(), layout.chunk_size());
    for (uint64_t i = 0; i < chunks; ++i) {
      std::map<uint32_t, std::string>& chunk = all.emplace_back();
      for (uint32_t id : ReplicaServers(layout, i)) {
        std::string buf(layout.chunk_size() + 64, '\0');  // room for a fragment's header
        absl::StatusOr<size_t> n = transport.ReadChunk(id, ino, i, 0, buf.data(), buf.size());
        if (n.ok()) {
          buf.resize(*n);
          chunk[id] = buf;
        } else {
          chunk[id] = absl::StrCat("!", ErrnoFromStatus(n.status()));
        }
      }
    }
    return all;
  }

  // One file a storm writer tried to save.
  struct StormSave {
    int writer = 0;
    int n = 0;
    bool after_kill = false;  // begun after the kill
    absl::StatusOr<meta::Attr> result;
  };
  struct Storm {
    std::vector<StormSave> saves;
    absl::Status kill;  // of the victim
    int saved = 0;      // saves that returned 0
    int saved_after_kill = 0;
    // From the kill to the first save begun after it that returned 0.
    absl::Duration first_save_after_kill = absl::InfiniteDuration();
  };
  // A save storm: `writers` threads, each with its own Client, save files
  // "w<writer>-<n>" holding data(writer, n) in dir_ until stopped. Once
  // 2 * writers saves returned 0 (or 60 s passed), storage server `victim`
  // is killed -9; the storm goes on until `writers` saves begun after the
  // kill returned 0 (or 30 s passed: the service must first see the server
  // down), then stops. Every save is recorded, failed ones too.
  Storm RunStormKillingServer(int victim, int writers,
                              const std::function<std::string(int, int)>& data) {
    std::atomic<bool> killed{false};
    std::atomic<bool> stop{false};
    std::atomic<int> saved{0};
    std::atomic<int> saved_after_kill{0};
    absl::Mutex mu;
    Storm storm;  // saves guarded by mu until the writers are joined
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([&, w] {
        std::unique_ptr<client::Client> client = Connect();
        if (client == nullptr) return;
        for (int n = 0; !stop.load(); ++n) {
          StormSave save;
          save.writer = w;
          save.n = n;
          save.after_kill = killed.load();
          save.result = WriteFile(*client, dir_, absl::StrCat("w", w, "-", n), data(w, n));
          if (save.result.ok()) {
            saved.fetch_add(1);
            if (save.after_kill) saved_after_kill.fetch_add(1);
          }
          absl::MutexLock lock(&mu);
          storm.saves.push_back(std::move(save));
        }
      });
    }
    absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (saved.load() < 2 * writers && absl::Now() < deadline) ::usleep(10 * 1000);
    storm.kill = cluster_->StopStorage(victim, SIGKILL);
    const absl::Time kill_time = absl::Now();
    killed.store(true);
    deadline = absl::Now() + absl::Seconds(30);
    while (saved_after_kill.load() < writers && absl::Now() < deadline) {
      if (saved_after_kill.load() > 0 && storm.first_save_after_kill == absl::InfiniteDuration()) {
        storm.first_save_after_kill = absl::Now() - kill_time;
      }
      ::usleep(10 * 1000);
    }
    stop.store(true);
    for (std::thread& t : threads) t.join();
    storm.saved = saved.load();
    storm.saved_after_kill = saved_after_kill.load();
    return storm;
  }

  std::unique_ptr<ckptfs::testing::LocalCluster> cluster_;
  std::unique_ptr<client::Client> client_;
  uint64_t dir_ = 0;
};

}  // namespace ckptfs::replication

#endif  // CKPTFS_TESTS_REPLICATION_REPLICATION_SUPPORT_H_
