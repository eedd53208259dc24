// ChunkStore losing power: the store runs on a FaultInjectionFileSystem,
// is closed ("the process lost power"), the file system drops everything
// not yet durable, and the store is opened again. What Sync(ino) or
// SyncAll() confirmed must read back exact; a chunk changed since its last
// sync may read as its last synced version, as missing (ENOENT), or as EIO
// (a torn chunk its CRCs catch), never as other bytes with OK.
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
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

// Forwards every call to `base`, running `before_sync_dir` (when set)
// before each SyncDir: a test's way to act at that exact step of a Sync.
class HookedFileSystem final : public FileSystem {
 public:
  explicit HookedFileSystem(FileSystem& base) : base_(base) {}

  std::function<void(const std::string& dir)> before_sync_dir;

  absl::StatusOr<UniqueFd> Open(const std::string& path, int flags, mode_t mode) override {
    return base_.Open(path, flags, mode);
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    return base_.Rename(from, to);
  }
  absl::Status Unlink(const std::string& path) override { return base_.Unlink(path); }
  absl::Status MakeDir(const std::string& path) override { return base_.MakeDir(path); }
  absl::Status RemoveDir(const std::string& path) override { return base_.RemoveDir(path); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override {
    return base_.ListDir(path);
  }
  absl::StatusOr<struct stat> Stat(const std::string& path) override { return base_.Stat(path); }
  absl::StatusOr<struct statvfs> StatFileSystem(const std::string& path) override {
    return base_.StatFileSystem(path);
  }
  absl::Status SyncFiles(Ring& ring, absl::Span<const std::string> paths) override {
    return base_.SyncFiles(ring, paths);
  }
  absl::Status SyncDir(Ring& ring, const std::string& path) override {
    if (before_sync_dir) before_sync_dir(path);
    return base_.SyncDir(ring, path);
  }
  absl::Status SyncFileSystem(const std::string& path) override {
    return base_.SyncFileSystem(path);
  }

 private:
  FileSystem& base_;
};

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
      const std::string data =
          Pattern(1000 * index + 17 * ino, static_cast<uint32_t>(ino * 10 + index));
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

// A write-back error is reported by the kernel to one sync only (each sync
// opens its file afresh); the store must keep it, so that every later sync
// of the chunks it may have lost fails too, until they are written again.
TEST_F(ChunkStorePowerLossTest, AWritebackErrorFailsEverySyncOfTheChunksItLost) {
  ASSERT_TRUE(Write({7, 0}, 0, Pattern(5000, 70), true).ok());
  ASSERT_TRUE(Write({8, 0}, 0, Pattern(5000, 80), true).ok());
  fs_->InjectWritebackError(EIO);
  absl::Status first = store_->SyncAll();
  EXPECT_EQ(ErrnoFromStatus(first), EIO) << first;
  absl::Status second = store_->SyncAll();
  EXPECT_EQ(ErrnoFromStatus(second), EIO) << "a second commit's sync: " << second;
  absl::Status one = store_->Sync(*ring_, 7);
  EXPECT_EQ(ErrnoFromStatus(one), EIO) << "an fsync of inode 7: " << one;
  // Written again, inode 7 syncs; the store as a whole not while inode 8
  // still holds lost bytes.
  const std::string again = Pattern(5000, 71);
  ASSERT_TRUE(Write({7, 0}, 0, again, true).ok());
  EXPECT_TRUE(store_->Sync(*ring_, 7).ok());
  EXPECT_EQ(ErrnoFromStatus(store_->SyncAll()), EIO);
  ASSERT_TRUE(store_->Trim(*ring_, 8, 0, kChunkSize).ok());
  EXPECT_TRUE(store_->SyncAll().ok());
  PowerLoss();
  auto back = ReadAll({7, 0});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == again);
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

// A write that lands between a Sync's fdatasync of the chunk files and its
// fsync of their directory: the new chunk's name is durable, its data never
// was. After the power loss its file is there but empty, and the CRC checks
// must call it EIO — not data, and not the old version either.
TEST_F(ChunkStorePowerLossTest, AChunkTornByAPowerLossReadsAsEio) {
  store_.reset();
  HookedFileSystem hooked(*fs_);
  auto store = ChunkStore::Open(dir_.path(), &hooked);
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = *std::move(store);
  ASSERT_TRUE(Write({7, 0}, 0, Pattern(5000, 1), true).ok());
  ASSERT_TRUE(Write({7, 1}, 0, Pattern(5000, 2), true).ok());
  ASSERT_TRUE(store_->Sync(*ring_, 7).ok());
  const std::string inode_dir = store_->InodeDir(7);
  int hooked_writes = 0;
  hooked.before_sync_dir = [&](const std::string& dir) {
    if (dir != inode_dir || hooked_writes++ > 0) return;
    ASSERT_TRUE(Write({7, 0}, 0, Pattern(6000, 3), true).ok());
  };
  ASSERT_TRUE(store_->Sync(*ring_, 7).ok());
  ASSERT_EQ(hooked_writes, 1);
  hooked.before_sync_dir = nullptr;
  store_.reset();  // before `hooked` goes
  auto report = fs_->DropUnsyncedData();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->never_synced, 1u);
  OpenStore();
  auto torn = ReadAll({7, 0});
  EXPECT_EQ(ErrnoFromStatus(torn.status()), EIO) << torn.status();
  auto intact = ReadAll({7, 1});
  ASSERT_TRUE(intact.ok()) << intact.status();
  EXPECT_TRUE(*intact == Pattern(5000, 2));
  // A merge into the torn chunk fails too; a whole write repairs it.
  EXPECT_EQ(ErrnoFromStatus(Write({7, 0}, 10, "x", false)), EIO);
  ASSERT_TRUE(Write({7, 0}, 0, "repaired", true).ok());
  auto repaired = ReadAll({7, 0});
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_EQ(*repaired, "repaired");
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
        const std::string data =
            Pattern(1 + pick(std::min<uint32_t>(6000, kChunkSize - offset)), ++seed);
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
          ASSERT_TRUE(*back == *chunk.synced)
              << name << ": " << back->size() << " bytes, " << chunk.synced->size() << " synced";
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

// Writers and syncs of the same inode at once: a sync may make a chunk's
// new name durable between syncing the files and syncing the directory, so
// that the name outlives the power loss but the data does not (a torn
// chunk). Whatever comes back, a chunk never reads as bytes that were not
// one of its versions, nor older than what its writer's own Sync confirmed.
TEST_F(ChunkStorePowerLossTest, ConcurrentWritesAndSyncsNeverServeWrongBytes) {
  constexpr uint64_t kInodes = 3;
  constexpr uint32_t kChunks = 4;
  constexpr int kWrites = 155;  // the last few not confirmed by the writer
  struct History {
    std::vector<std::string> versions;  // in the order written
    std::optional<size_t> confirmed;    // the version a Sync confirmed last
  };
  // history[ino - 1][index]; each inode's entries belong to its writer.
  std::vector<std::vector<History>> history(kInodes, std::vector<History>(kChunks));
  std::atomic<uint64_t> writers_left{kInodes};
  std::vector<std::thread> threads;
  for (uint64_t ino = 1; ino <= kInodes; ++ino) {
    threads.emplace_back([&, ino] {  // the writer
      // A failed ASSERT returns early; the syncer must stop all the same.
      auto write = [&] {
        auto ring = Ring::Create(16);
        ASSERT_TRUE(ring.ok()) << ring.status();
        std::mt19937 rng(static_cast<uint32_t>(ino));
        auto& mine = history[ino - 1];
        for (int i = 0; i < kWrites; ++i) {
          const uint32_t index = static_cast<uint32_t>(rng() % kChunks);
          const std::string data =
              Pattern(1 + rng() % 8192, static_cast<uint32_t>(ino * 100000 + i));
          absl::Status s = store_->Write(**ring, {ino, index}, 0, absl::string_view(data), true);
          ASSERT_TRUE(s.ok()) << s;
          mine[index].versions.push_back(data);
          if (i % 10 == 9) {
            ASSERT_TRUE(store_->Sync(**ring, ino).ok());
            for (History& chunk : mine) {
              if (!chunk.versions.empty()) chunk.confirmed = chunk.versions.size() - 1;
            }
          }
        }
      };
      write();
      writers_left.fetch_sub(1);
    });
    threads.emplace_back([&, ino] {  // a syncer racing it
      auto ring = Ring::Create(16);
      ASSERT_TRUE(ring.ok()) << ring.status();
      while (writers_left.load() > 0) {
        absl::Status s = store_->Sync(**ring, ino);
        ASSERT_TRUE(s.ok()) << s;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  PowerLoss();
  int torn = 0;
  for (uint64_t ino = 1; ino <= kInodes; ++ino) {
    for (uint32_t index = 0; index < kChunks; ++index) {
      const History& chunk = history[ino - 1][index];
      const std::string name = absl::StrCat("chunk ", index, " of inode ", ino);
      auto back = ReadAll({ino, index});
      if (back.ok()) {
        size_t version = 0;
        while (version < chunk.versions.size() && chunk.versions[version] != *back) ++version;
        ASSERT_LT(version, chunk.versions.size())
            << name << " reads " << back->size() << " bytes with OK that it never held";
        if (chunk.confirmed.has_value()) {
          EXPECT_GE(version, *chunk.confirmed) << name << " went back past a confirmed sync";
        }
      } else if (ErrnoFromStatus(back.status()) == EIO) {
        ++torn;
      } else {
        ASSERT_EQ(ErrnoFromStatus(back.status()), ENOENT) << name << ": " << back.status();
        EXPECT_FALSE(chunk.confirmed.has_value()) << name << " vanished after a confirmed sync";
      }
    }
  }
  RecordProperty("torn_chunks", torn);
}

}  // namespace
}  // namespace ckptfs::storage
