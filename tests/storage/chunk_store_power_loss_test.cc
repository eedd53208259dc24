// ChunkStore losing power: the store runs on a FaultInjectionFileSystem,
// is closed ("the process lost power"), the file system drops everything
// not yet durable, and the store is opened again. What Sync(ino) or
// SyncAll() confirmed must read back exact; a chunk changed since its last
// sync may read as its last synced version, as missing (ENOENT), or as EIO
// (a torn chunk its CRCs catch), never as other bytes with OK.
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "server/storage/chunk_store.h"
#include "server/storage/testing/fault_injection_file_system.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

// Trims in these tests use this chunk size; chunks stay within it.
constexpr uint32_t kChunkSize = 16384;

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 7;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

class ChunkStorePowerLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto fs = FaultInjectionFileSystem::Create(dir_.path());
    ASSERT_TRUE(fs.ok()) << fs.status();
    fs_ = *std::move(fs);
    auto ring = Ring::Create(16);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
    OpenStore();
  }

  void OpenStore() {
    auto store = ChunkStore::Open(dir_.path(), fs_.get());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  // The process dies, the machine loses power, and the server comes back.
  void PowerLoss() {
    store_.reset();
    auto report = fs_->DropUnsyncedData();
    ASSERT_TRUE(report.ok()) << report.status();
    OpenStore();
    // Open empties tmp/ of whatever came back there.
    EXPECT_TRUE(std::filesystem::is_empty(dir_.path() + "/tmp"));
  }

  absl::Status Write(ChunkKey key, uint32_t offset, const std::string& data, bool replace) {
    return store_->Write(*ring_, key, offset, absl::string_view(data), replace);
  }

  // The whole chunk, or its error.
  absl::StatusOr<std::string> ReadAll(ChunkKey key) {
    auto slice = store_->Read(*ring_, buffer_, key, 0, kMaxChunkLength);
    if (!slice.ok()) return slice.status();
    return std::string(slice->data);
  }

  TempDir dir_;
  std::unique_ptr<FaultInjectionFileSystem> fs_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Ring> ring_;
  AlignedBuffer buffer_;
};

TEST_F(ChunkStorePowerLossTest, SyncedChunksSurviveAndUnsyncedOnesAreLost) {
  std::map<std::pair<uint64_t, uint32_t>, std::string> synced;
  for (uint64_t ino = 1; ino <= 3; ++ino) {
    for (uint32_t index = 0; index < 5; ++index) {
      const std::string data = Pattern(1000 * index + 17 * ino, static_cast<uint32_t>(ino * 10 + index));
      ASSERT_TRUE(Write({ino, index}, 0, data, true).ok());
      synced[{ino, index}] = data;
    }
    ASSERT_TRUE(store_->Sync(*ring_, ino).ok());
  }
  // After the syncs: an overwrite, a merge, a new chunk of a synced inode,
  // and a new inode. None of it synced.
  ASSERT_TRUE(Write({1, 0}, 0, "overwritten", true).ok());
  ASSERT_TRUE(Write({2, 3}, 10, "merged", false).ok());
  ASSERT_TRUE(Write({3, 9}, 0, "new chunk", true).ok());
  ASSERT_TRUE(Write({4, 0}, 0, "new inode", true).ok());
  PowerLoss();
  for (const auto& [chunk, data] : synced) {
    auto back = ReadAll({chunk.first, chunk.second});
    ASSERT_TRUE(back.ok()) << "chunk " << chunk.second << " of inode " << chunk.first << ": "
                           << back.status();
    EXPECT_TRUE(*back == data) << "chunk " << chunk.second << " of inode " << chunk.first;
  }
  EXPECT_EQ(ErrnoFromStatus(ReadAll({3, 9}).status()), ENOENT);
  EXPECT_EQ(ErrnoFromStatus(ReadAll({4, 0}).status()), ENOENT);
}

TEST_F(ChunkStorePowerLossTest, SyncAllMakesEveryChunkDurable) {
  std::map<std::pair<uint64_t, uint32_t>, std::string> synced;
  for (uint64_t ino = 10; ino < 16; ++ino) {
    for (uint32_t index = 0; index < 4; ++index) {
      std::string data = Pattern(3000 + 500 * index, static_cast<uint32_t>(ino + 100 * index));
      ASSERT_TRUE(Write({ino, index}, 0, data, true).ok());
      ASSERT_TRUE(Write({ino, index}, 100, "merge", false).ok());
      data.replace(100, 5, "merge");
      synced[{ino, index}] = data;
    }
  }
  ASSERT_TRUE(store_->SyncAll().ok());
  ASSERT_TRUE(Write({10, 0}, 0, "after the commit", true).ok());
  ASSERT_TRUE(Write({16, 0}, 0, "after the commit", true).ok());
  ASSERT_TRUE(store_->Trim(*ring_, 11, 0, kChunkSize).ok());
  PowerLoss();
  for (const auto& [chunk, data] : synced) {
    auto back = ReadAll({chunk.first, chunk.second});
    ASSERT_TRUE(back.ok()) << "chunk " << chunk.second << " of inode " << chunk.first << ": "
                           << back.status();
    EXPECT_TRUE(*back == data) << "chunk " << chunk.second << " of inode " << chunk.first;
  }
  EXPECT_EQ(ErrnoFromStatus(ReadAll({16, 0}).status()), ENOENT);
}

// A trim that removes every chunk of an inode (and its directory), then a
// sync: the chunks must stay gone, or a file cut to zero and grown again
// would read its old bytes in the holes.
TEST_F(ChunkStorePowerLossTest, ASyncedTrimToZeroStaysTrimmed) {
  ASSERT_TRUE(Write({5, 0}, 0, Pattern(5000, 1), true).ok());
  ASSERT_TRUE(Write({5, 1}, 0, Pattern(5000, 2), true).ok());
  ASSERT_TRUE(store_->Sync(*ring_, 5).ok());
  ASSERT_TRUE(store_->Trim(*ring_, 5, 0, kChunkSize).ok());
  ASSERT_TRUE(store_->Sync(*ring_, 5).ok());
  PowerLoss();
  EXPECT_EQ(ErrnoFromStatus(ReadAll({5, 0}).status()), ENOENT);
  EXPECT_EQ(ErrnoFromStatus(ReadAll({5, 1}).status()), ENOENT);
}

TEST_F(ChunkStorePowerLossTest, ASyncedPartialTrimStaysTrimmed) {
  const std::string first = Pattern(kChunkSize, 3);
  ASSERT_TRUE(Write({6, 0}, 0, first, true).ok());
  ASSERT_TRUE(Write({6, 1}, 0, Pattern(9000, 4), true).ok());
  ASSERT_TRUE(Write({6, 2}, 0, Pattern(9000, 5), true).ok());
  ASSERT_TRUE(store_->Sync(*ring_, 6).ok());
  ASSERT_TRUE(store_->Trim(*ring_, 6, kChunkSize + 100, kChunkSize).ok());
  ASSERT_TRUE(store_->Sync(*ring_, 6).ok());
  PowerLoss();
  auto zero = ReadAll({6, 0});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_TRUE(*zero == first);
  auto one = ReadAll({6, 1});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, Pattern(9000, 4).substr(0, 100));
  EXPECT_EQ(ErrnoFromStatus(ReadAll({6, 2}).status()), ENOENT);
}

// What the test expects of one chunk.
struct ChunkModel {
  std::optional<std::string> now;     // what it holds now; none: not stored
  std::optional<std::string> synced;  // as of its last sync; none: not stored
  bool dirty = false;                 // changed since then
};

// Many chunks of a few inodes; several rounds of replaces, merges,
// extensions and trims, with syncs of single inodes and whole-store syncs
// in between, each round ending in a power loss.
TEST_F(ChunkStorePowerLossTest, RandomRoundsKeepEverythingSynced) {
  constexpr uint64_t kInodes = 5;
  constexpr uint32_t kChunksPerInode = 6;
  constexpr int kRounds = 8;
  constexpr int kOpsPerRound = 80;
  std::mt19937 rng(20261130);
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  std::map<std::pair<uint64_t, uint32_t>, ChunkModel> model;
  for (uint64_t ino = 1; ino <= kInodes; ++ino) {
    for (uint32_t index = 0; index < kChunksPerInode; ++index) model[{ino, index}];
  }
  int lost = 0, kept = 0;  // dirty chunks that came back old / missing
  uint32_t seed = 1;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    for (int op = 0; op < kOpsPerRound; ++op) {
      const uint64_t ino = 1 + pick(kInodes);
      const uint32_t index = pick(kChunksPerInode);
      ChunkModel& chunk = model[{ino, index}];
      const uint32_t what = pick(100);
      if (what < 30) {  // replace
        const std::string data = Pattern(pick(kChunkSize + 1), ++seed);
        ASSERT_TRUE(Write({ino, index}, 0, data, true).ok());
        chunk.now = data;
        chunk.dirty = true;
      } else if (what < 55) {  // merge into the stored bytes (or create)
        const uint32_t length = chunk.now.has_value() ? chunk.now->size() : 0;
        const uint32_t offset = pick(length + 1);
        const std::string data = Pattern(1 + pick(std::min<uint32_t>(6000, kChunkSize - offset)), ++seed);
        if (offset + data.size() > kChunkSize) continue;
        absl::Status s = Write({ino, index}, offset, data, false);
        ASSERT_TRUE(s.ok()) << s;
        std::string next = chunk.now.value_or("");
        if (next.size() < offset + data.size()) next.resize(offset + data.size(), '\0');
        next.replace(offset, data.size(), data);
        chunk.now = next;
        chunk.dirty = true;
      } else if (what < 65) {  // extend with zeros
        const uint32_t length = chunk.now.has_value() ? chunk.now->size() : 0;
        const uint32_t offset = length + pick(kChunkSize - length + 1);
        ASSERT_TRUE(Write({ino, index}, offset, "", false).ok());
        std::string next = chunk.now.value_or("");
        if (next.size() < offset) next.resize(offset, '\0');
        chunk.now = next;
        chunk.dirty = true;
      } else if (what < 72) {  // trim the inode
        const uint64_t new_size = pick(4) == 0 ? 0 : pick(kChunksPerInode * kChunkSize);
        ASSERT_TRUE(store_->Trim(*ring_, ino, new_size, kChunkSize).ok());
        for (uint32_t i = 0; i < kChunksPerInode; ++i) {
          ChunkModel& c = model[{ino, i}];
          if (!c.now.has_value()) continue;
          const uint64_t start = uint64_t{i} * kChunkSize;
          if (new_size == 0 || start >= new_size) {
            c.now.reset();
            c.dirty = true;
          } else if (new_size - start < c.now->size()) {
            c.now->resize(new_size - start);
            c.dirty = true;
          }
        }
      } else if (what < 97) {  // sync one inode
        ASSERT_TRUE(store_->Sync(*ring_, ino).ok());
        for (uint32_t i = 0; i < kChunksPerInode; ++i) {
          ChunkModel& c = model[{ino, i}];
          c.synced = c.now;
          c.dirty = false;
        }
      } else {  // a checkpoint commit
        ASSERT_TRUE(store_->SyncAll().ok());
        for (auto& [key, c] : model) {
          c.synced = c.now;
          c.dirty = false;
        }
      }
    }
    PowerLoss();
    for (auto& [key, chunk] : model) {
      const ChunkKey chunk_key{key.first, key.second};
      const std::string name = absl::StrCat("chunk ", key.second, " of inode ", key.first,
                                            chunk.dirty ? " (changed since its sync)" : "");
      auto back = ReadAll(chunk_key);
      if (!chunk.dirty) {
        // Exactly what the last sync covered.
        if (chunk.synced.has_value()) {
          ASSERT_TRUE(back.ok()) << name << ": " << back.status();
          ASSERT_TRUE(*back == *chunk.synced) << name << ": " << back->size() << " bytes, "
                                              << chunk.synced->size() << " synced";
        } else {
          ASSERT_EQ(ErrnoFromStatus(back.status()), ENOENT) << name << ": " << back.status();
        }
      } else if (back.ok()) {
        ASSERT_TRUE(chunk.synced.has_value() && *back == *chunk.synced)
            << name << ": reads " << back->size() << " bytes with OK that are not its synced "
            << "version";
        ++kept;
      } else {
        const int err = ErrnoFromStatus(back.status());
        ASSERT_TRUE(err == ENOENT || err == EIO) << name << ": " << back.status();
        ++lost;
      }
      // What survived is the state now, all of it durable. A torn chunk
      // is written again whole (with nothing durable behind it).
      if (back.ok()) {
        chunk.now = *back;
        chunk.synced = chunk.now;
        chunk.dirty = false;
      } else if (ErrnoFromStatus(back.status()) == ENOENT) {
        chunk.now.reset();
        chunk.synced.reset();
        chunk.dirty = false;
      } else {
        const std::string data = Pattern(pick(kChunkSize + 1), ++seed);
        ASSERT_TRUE(Write(chunk_key, 0, data, true).ok());
        chunk.now = data;
        chunk.synced.reset();
        chunk.dirty = true;
      }
    }
  }
  // The rounds lost something (else the power loss did nothing) and kept
  // old versions of chunks changed after their sync.
  EXPECT_GT(lost, 0);
  EXPECT_GT(kept, 0);
}

}  // namespace
}  // namespace ckptfs::storage
