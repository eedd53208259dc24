// The storage Server in-process losing power: a client WRITEs over
// DataConnection and SYNCs (one inode, or the whole store as a checkpoint
// commit does); the server stops, the FaultInjectionFileSystem under its
// ChunkStore drops what was not durable, and a new server on the same
// directory must serve every byte a SYNC confirmed.
#include <cerrno>
#include <memory>
#include <string>

#include "common/crc32c.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "server/storage/server.h"
#include "server/storage/testing/fault_injection_file_system.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2246822519u + 3;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 16);
  }
  return s;
}

class ServerPowerLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto fs = FaultInjectionFileSystem::Create(dir_.path());
    ASSERT_TRUE(fs.ok()) << fs.status();
    fs_ = *std::move(fs);
    Start();
  }

  void Start() {
    auto store = ChunkStore::Open(dir_.path(), fs_.get());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    Server::Options options;
    options.buffer_pool_bytes = kMinBufferPoolBytes;
    options.disk_threads = 4;
    auto server = Server::Start(*store_, {"127.0.0.1", 0}, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto connection = DataConnection::Connect(server_->address(), absl::Seconds(10));
    ASSERT_TRUE(connection.ok()) << connection.status();
    connection_ = *std::move(connection);
  }

  void PowerLoss() {
    connection_.reset();
    server_.reset();  // stops and joins every thread
    store_.reset();
    auto report = fs_->DropUnsyncedData();
    ASSERT_TRUE(report.ok()) << report.status();
    Start();
  }

  absl::Status Write(uint64_t ino, uint32_t index, const std::string& data) {
    data::RequestHeader request;
    request.set_op(data::WRITE);
    request.set_ino(ino);
    request.set_chunk_index(index);
    request.set_offset(0);
    request.set_replace(true);
    request.set_payload_crc32c(Crc32c(data.data(), data.size()));
    return connection_->Call(request, data.data(), data.size(), nullptr, 0).status();
  }

  absl::StatusOr<std::string> Read(uint64_t ino, uint32_t index, uint32_t length) {
    data::RequestHeader request;
    request.set_op(data::READ);
    request.set_ino(ino);
    request.set_chunk_index(index);
    request.set_offset(0);
    request.set_length(length);
    std::string out(length, '\0');
    auto response = connection_->Call(request, nullptr, 0, out.data(), out.size());
    if (!response.ok()) return response.status();
    out.resize(response->payload_len);
    return out;
  }

  absl::Status Sync(uint64_t ino, bool whole_store) {
    data::RequestHeader request;
    request.set_op(data::SYNC);
    request.set_ino(ino);
    request.set_whole_store(whole_store);
    return connection_->Call(request, nullptr, 0, nullptr, 0).status();
  }

  TempDir dir_;
  std::unique_ptr<FaultInjectionFileSystem> fs_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<DataConnection> connection_;
};

TEST_F(ServerPowerLossTest, WhatASyncConfirmedIsServedAfterPowerLoss) {
  constexpr size_t kSize = 100000;
  // Inode 1 synced by itself, inode 2 never, inode 3 synced then
  // overwritten.
  for (uint32_t index = 0; index < 4; ++index) {
    ASSERT_TRUE(Write(1, index, Pattern(kSize, 10 + index)).ok());
    ASSERT_TRUE(Write(2, index, Pattern(kSize, 20 + index)).ok());
    ASSERT_TRUE(Write(3, index, Pattern(kSize, 30 + index)).ok());
  }
  ASSERT_TRUE(Sync(1, false).ok());
  ASSERT_TRUE(Sync(3, false).ok());
  ASSERT_TRUE(Write(3, 0, Pattern(kSize, 99)).ok());
  PowerLoss();
  for (uint32_t index = 0; index < 4; ++index) {
    auto one = Read(1, index, kSize);
    ASSERT_TRUE(one.ok()) << one.status();
    EXPECT_TRUE(*one == Pattern(kSize, 10 + index)) << "inode 1 chunk " << index;
    EXPECT_EQ(ErrnoFromStatus(Read(2, index, kSize).status()), ENOENT) << "inode 2 chunk " << index;
    auto three = Read(3, index, kSize);
    ASSERT_TRUE(three.ok()) << three.status();
    EXPECT_TRUE(*three == Pattern(kSize, 30 + index)) << "inode 3 chunk " << index;
  }

  // A checkpoint commit: one whole-store SYNC covers every inode.
  for (uint32_t index = 0; index < 4; ++index) {
    ASSERT_TRUE(Write(2, index, Pattern(kSize, 40 + index)).ok());
    ASSERT_TRUE(Write(4, index, Pattern(kSize, 50 + index)).ok());
  }
  ASSERT_TRUE(Sync(0, true).ok());
  ASSERT_TRUE(Write(5, 0, Pattern(kSize, 60)).ok());
  PowerLoss();
  for (uint32_t index = 0; index < 4; ++index) {
    auto two = Read(2, index, kSize);
    ASSERT_TRUE(two.ok()) << two.status();
    EXPECT_TRUE(*two == Pattern(kSize, 40 + index)) << "inode 2 chunk " << index;
    auto four = Read(4, index, kSize);
    ASSERT_TRUE(four.ok()) << four.status();
    EXPECT_TRUE(*four == Pattern(kSize, 50 + index)) << "inode 4 chunk " << index;
  }
  EXPECT_EQ(ErrnoFromStatus(Read(5, 0, kSize).status()), ENOENT);
}

// A restarted server (power lost, so its unsynced writes with it) refuses a
// SYNC that names writes its earlier run acknowledged: whole store (a
// checkpoint commit) or one inode (fsync).
TEST_F(ServerPowerLossTest, ARestartedServerRefusesToSyncWritesOfItsEarlierRun) {
  constexpr size_t kSize = 100000;
  const std::string data = Pattern(kSize, 5);
  data::RequestHeader write;
  write.set_op(data::WRITE);
  write.set_ino(1);
  write.set_replace(true);
  write.set_payload_crc32c(Crc32c(data.data(), data.size()));
  auto written = connection_->Call(write, data.data(), data.size(), nullptr, 0);
  ASSERT_TRUE(written.ok()) << written.status();
  const uint64_t before = written->header.incarnation();
  EXPECT_NE(before, 0u);
  PowerLoss();
  EXPECT_EQ(ErrnoFromStatus(Read(1, 0, kSize).status()), ENOENT);  // what it lost
  for (bool whole_store : {true, false}) {
    data::RequestHeader sync;
    sync.set_op(data::SYNC);
    sync.set_ino(1);
    sync.set_whole_store(whole_store);
    sync.add_written_by(before);
    absl::Status refused = connection_->Call(sync, nullptr, 0, nullptr, 0).status();
    EXPECT_EQ(ErrnoFromStatus(refused), EIO) << "whole_store " << whole_store << ": " << refused;
    EXPECT_NE(refused.message().find("restarted"), absl::string_view::npos) << refused;
  }
  // Its own writes it confirms.
  auto again = connection_->Call(write, data.data(), data.size(), nullptr, 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->header.incarnation(), before);
  data::RequestHeader sync;
  sync.set_op(data::SYNC);
  sync.set_ino(1);
  sync.add_written_by(again->header.incarnation());
  EXPECT_TRUE(connection_->Call(sync, nullptr, 0, nullptr, 0).ok());
}

// Two checkpoint commits syncing the same server after a write-back error
// lost chunks of the first: both fail, not only the one the kernel told.
TEST_F(ServerPowerLossTest, EveryWholeStoreSyncAfterAWritebackErrorFails) {
  constexpr size_t kSize = 100000;
  ASSERT_TRUE(Write(1, 0, Pattern(kSize, 1)).ok());
  fs_->InjectWritebackError(EIO);
  absl::Status first = Sync(0, true);
  EXPECT_EQ(ErrnoFromStatus(first), EIO) << first;
  absl::Status second = Sync(0, true);
  EXPECT_EQ(ErrnoFromStatus(second), EIO) << second;
  EXPECT_EQ(ErrnoFromStatus(Sync(1, false)), EIO);
  ASSERT_TRUE(Write(1, 0, Pattern(kSize, 2)).ok());
  EXPECT_TRUE(Sync(0, true).ok());
}

}  // namespace
}  // namespace ckptfs::storage
