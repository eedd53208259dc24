// ChunkStore on a real directory: round trips of every size class, replace
// and merge semantics, growth, holes, trim, sync, crash leftovers, and
// corruption detection (a flipped byte must read as EIO, never as data).
#include "server/storage/chunk_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/crc32c.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = static_cast<uint32_t>(seed) * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

// Flips one byte of a file in place.
void FlipByte(const std::string& path, off_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, offset), 1);
  c = static_cast<char>(c ^ 0x01);
  ASSERT_EQ(::pwrite(fd, &c, 1, offset), 1);
  ::close(fd);
}

class ChunkStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto store = ChunkStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto ring = Ring::Create(16);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
  }

  absl::Status Write(ChunkKey key, uint32_t offset, const std::string& data, bool replace) {
    return store_->Write(*ring_, key, offset, absl::string_view(data), replace);
  }

  // The whole chunk, or its error.
  absl::StatusOr<std::string> ReadAll(ChunkKey key) {
    auto slice = store_->Read(*ring_, buffer_, key, 0, kMaxChunkLength);
    if (!slice.ok()) return slice.status();
    EXPECT_EQ(slice->data.size(), slice->chunk_length);
    return std::string(slice->data);
  }

  TempDir dir_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Ring> ring_;
  AlignedBuffer buffer_;
};

TEST_F(ChunkStoreTest, RoundTripsEverySize) {
  const std::vector<size_t> sizes = {0, 1, 4095, 4096, 4097, 1 << 20, (4 << 20) + 17};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const ChunkKey key{42, static_cast<uint32_t>(i)};
    const std::string data = Pattern(sizes[i], static_cast<int>(i));
    ASSERT_TRUE(Write(key, 0, data, /*replace=*/true).ok()) << sizes[i];
    auto back = ReadAll(key);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->size(), data.size());
    EXPECT_TRUE(*back == data) << "size " << sizes[i];
  }
  // Chunk files are whole 4096-byte blocks (O_DIRECT-able).
  struct stat st {};
  ASSERT_EQ(::stat(store_->ChunkPath({42, 2}).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4096 + 4096);
}

// Chunk data is for the server's user alone: other local users cannot read
// it around the data path's credential.
TEST_F(ChunkStoreTest, ItsDirectoriesAreTheServersUsersAlone) {
  ASSERT_TRUE(Write({7, 0}, 0, "x", /*replace=*/true).ok());
  for (const std::string& dir : {dir_.path() + "/chunks", dir_.path() + "/tmp",
                                 dir_.path() + "/quarantine", store_->InodeDir(7)}) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }
}

TEST_F(ChunkStoreTest, AlignedPayloadIsWrittenInPlace) {
  AlignedBuffer payload;
  ASSERT_TRUE(payload.Reserve(10000).ok());
  const std::string data = Pattern(10000, 3);
  std::memcpy(payload.data(), data.data(), data.size());
  payload.set_size(data.size());
  ASSERT_TRUE(store_->Write(*ring_, {1, 0}, 0, payload, true).ok());
  EXPECT_EQ(*ReadAll({1, 0}), data);
}

TEST_F(ChunkStoreTest, ReadsASubrangeCutAtTheStoredLength) {
  const std::string data = Pattern(10000, 1);
  ASSERT_TRUE(Write({5, 0}, 0, data, true).ok());
  auto mid = store_->Read(*ring_, buffer_, {5, 0}, 4000, 100);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(std::string(mid->data), data.substr(4000, 100));
  EXPECT_EQ(mid->chunk_length, 10000u);
  EXPECT_EQ(mid->data_crc32c, Crc32c(mid->data.data(), mid->data.size()));
  auto whole = store_->Read(*ring_, buffer_, {5, 0}, 0, 20000);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->data_crc32c, Crc32c(data.data(), data.size()));
  auto tail = store_->Read(*ring_, buffer_, {5, 0}, 9990, 100);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(std::string(tail->data), data.substr(9990));
  auto past = store_->Read(*ring_, buffer_, {5, 0}, 20000, 100);
  ASSERT_TRUE(past.ok());
  EXPECT_TRUE(past->data.empty());
  EXPECT_EQ(past->chunk_length, 10000u);
}

TEST_F(ChunkStoreTest, MissingChunkIsEnoent) {
  auto missing = ReadAll({9, 9});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(ErrnoFromStatus(missing.status()), ENOENT);
}

TEST_F(ChunkStoreTest, ReplaceMakesTheChunkExactlyThePayload) {
  ASSERT_TRUE(Write({2, 0}, 0, Pattern(10000, 1), true).ok());
  ASSERT_TRUE(Write({2, 0}, 0, "short", true).ok());
  EXPECT_EQ(*ReadAll({2, 0}), "short");
  absl::Status bad = Write({2, 0}, 10, "x", true);
  EXPECT_EQ(ErrnoFromStatus(bad), EINVAL);
  EXPECT_EQ(*ReadAll({2, 0}), "short");
}

TEST_F(ChunkStoreTest, MergeSplicesIntoExistingBytes) {
  std::string data = Pattern(8192, 2);
  ASSERT_TRUE(Write({3, 1}, 0, data, true).ok());
  ASSERT_TRUE(Write({3, 1}, 100, "hello", false).ok());
  data.replace(100, 5, "hello");
  EXPECT_EQ(*ReadAll({3, 1}), data);
  // A merge at offset 0 shorter than the chunk keeps the tail.
  ASSERT_TRUE(Write({3, 1}, 0, "AB", false).ok());
  data.replace(0, 2, "AB");
  EXPECT_EQ(*ReadAll({3, 1}), data);
}

TEST_F(ChunkStoreTest, AnEmptyMergeMakesTheGapWithZeros) {
  ASSERT_TRUE(Write({4, 0}, 0, "abc", true).ok());
  ASSERT_TRUE(Write({4, 0}, 5000, "", false).ok());
  ASSERT_TRUE(Write({4, 0}, 5000, "xyz", false).ok());
  std::string want = "abc" + std::string(5000 - 3, '\0') + "xyz";
  EXPECT_EQ(*ReadAll({4, 0}), want);
  // Into a missing chunk: leading zeros.
  ASSERT_TRUE(Write({4, 1}, 10, "", false).ok());
  ASSERT_TRUE(Write({4, 1}, 10, "q", false).ok());
  EXPECT_EQ(*ReadAll({4, 1}), std::string(10, '\0') + "q");
}

// A copy that lost its chunk (a server back with an empty disk) must not
// take zeros for the bytes before a partial write: the other copies hold
// data there.
TEST_F(ChunkStoreTest, AMergePastTheStoredBytesIsRefused) {
  absl::Status missing = Write({5, 0}, 10, "q", false);
  EXPECT_EQ(ErrnoFromStatus(missing), ENODATA) << missing;
  EXPECT_NE(missing.message().find("chunk 0 of inode 5, which holds nothing"),
            absl::string_view::npos)
      << missing;
  EXPECT_EQ(ErrnoFromStatus(ReadAll({5, 0}).status()), ENOENT);  // nothing made
  ASSERT_TRUE(Write({5, 1}, 0, "abc", true).ok());
  absl::Status short_chunk = Write({5, 1}, 4, "q", false);
  EXPECT_EQ(ErrnoFromStatus(short_chunk), ENODATA) << short_chunk;
  EXPECT_NE(short_chunk.message().find("only 3 bytes"), absl::string_view::npos) << short_chunk;
  EXPECT_EQ(*ReadAll({5, 1}), "abc");
  // Right at the end is no gap: it appends. Far inside a long chunk too.
  ASSERT_TRUE(Write({5, 1}, 3, "d", false).ok());
  EXPECT_EQ(*ReadAll({5, 1}), "abcd");
  const std::string big = Pattern(20000, 3);
  ASSERT_TRUE(Write({5, 2}, 0, big, true).ok());
  ASSERT_TRUE(Write({5, 2}, 19999, "zz", false).ok());
  EXPECT_EQ(*ReadAll({5, 2}), big.substr(0, 19999) + "zz");
}

TEST_F(ChunkStoreTest, SequentialAppendsBuildTheChunk) {
  const std::string data = Pattern(3 * 100000 + 7, 8);
  for (size_t off = 0; off < data.size(); off += 100000) {
    ASSERT_TRUE(Write({6, 0}, static_cast<uint32_t>(off), data.substr(off, 100000), false).ok());
  }
  EXPECT_EQ(*ReadAll({6, 0}), data);
}

TEST_F(ChunkStoreTest, GrowsUpToTheLimitAndNoFurther) {
  ASSERT_TRUE(Write({7, 0}, kMaxChunkLength - 4, "", false).ok());
  ASSERT_TRUE(Write({7, 0}, kMaxChunkLength - 4, "tail", false).ok());
  auto slice = store_->Read(*ring_, buffer_, {7, 0}, kMaxChunkLength - 8, 8);
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(slice->chunk_length, kMaxChunkLength);
  EXPECT_EQ(std::string(slice->data), std::string(4, '\0') + "tail");
  EXPECT_EQ(ErrnoFromStatus(Write({7, 0}, kMaxChunkLength - 4, "tail!", false)), EINVAL);
  EXPECT_EQ(ErrnoFromStatus(Write({7, 1}, kMaxChunkLength, "x", false)), EINVAL);
}

TEST_F(ChunkStoreTest, TrimDeletesAndCuts) {
  const uint32_t chunk_size = 1000;
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(Write({8, i}, 0, Pattern(chunk_size, static_cast<int>(i)), true).ok());
  }
  ASSERT_TRUE(store_->Trim(*ring_, 8, 2500, chunk_size).ok());
  EXPECT_EQ(*ReadAll({8, 0}), Pattern(chunk_size, 0));
  EXPECT_EQ(*ReadAll({8, 1}), Pattern(chunk_size, 1));
  EXPECT_EQ(*ReadAll({8, 2}), Pattern(chunk_size, 2).substr(0, 500));
  EXPECT_EQ(ErrnoFromStatus(ReadAll({8, 3}).status()), ENOENT);
  // At a chunk boundary: the chunk starting there goes.
  ASSERT_TRUE(store_->Trim(*ring_, 8, 1000, chunk_size).ok());
  EXPECT_EQ(ErrnoFromStatus(ReadAll({8, 1}).status()), ENOENT);
  EXPECT_EQ(*ReadAll({8, 0}), Pattern(chunk_size, 0));
  // To zero (what the orphan reclaimer sends, chunk size optional): all
  // gone, directory too.
  ASSERT_TRUE(store_->Trim(*ring_, 8, 0, 0).ok());
  EXPECT_EQ(ErrnoFromStatus(ReadAll({8, 0}).status()), ENOENT);
  EXPECT_FALSE(std::filesystem::exists(store_->InodeDir(8)));
}

TEST_F(ChunkStoreTest, TrimEdgeCases) {
  EXPECT_TRUE(store_->Trim(*ring_, 12345, 0, 4096).ok());  // nothing stored
  EXPECT_EQ(ErrnoFromStatus(store_->Trim(*ring_, 1, 100, 0)), EINVAL);
  // Other inodes are untouched.
  ASSERT_TRUE(Write({20, 0}, 0, "keep", true).ok());
  ASSERT_TRUE(Write({21, 0}, 0, "drop", true).ok());
  ASSERT_TRUE(store_->Trim(*ring_, 21, 0, 4096).ok());
  EXPECT_EQ(*ReadAll({20, 0}), "keep");
  // Writing again after the directory went away works.
  ASSERT_TRUE(Write({21, 0}, 0, "again", true).ok());
  EXPECT_EQ(*ReadAll({21, 0}), "again");
}

TEST_F(ChunkStoreTest, SyncSucceedsWithAndWithoutChunks) {
  for (uint32_t i = 0; i < 70; ++i) ASSERT_TRUE(Write({30, i}, 0, "x", true).ok());
  EXPECT_TRUE(store_->Sync(*ring_, 30).ok());
  EXPECT_TRUE(store_->Sync(*ring_, 31).ok());
}

TEST_F(ChunkStoreTest, SyncAllSyncsTheDataDirectoryAndFailsWhenItIsGone) {
  ASSERT_TRUE(Write({32, 0}, 0, "x", true).ok());
  EXPECT_TRUE(store_->SyncAll().ok());
  // A second store whose data directory disappears: SyncAll must open that
  // directory, so it reports the loss instead of claiming durability.
  const std::string other = dir_.path() + "/other";
  ASSERT_EQ(::mkdir(other.c_str(), 0755), 0);
  auto store = ChunkStore::Open(other);
  ASSERT_TRUE(store.ok()) << store.status();
  std::filesystem::remove_all(other);
  const absl::Status gone = (*store)->SyncAll();
  EXPECT_EQ(ErrnoFromStatus(gone), ENOENT) << gone;
}

TEST_F(ChunkStoreTest, FlippedDataByteIsEio) {
  ASSERT_TRUE(Write({40, 3}, 0, Pattern(5000, 4), true).ok());
  FlipByte(store_->ChunkPath({40, 3}), kChunkHeaderSize + 4321);
  auto read = ReadAll({40, 3});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(ErrnoFromStatus(read.status()), EIO);
  EXPECT_NE(read.status().message().find("chunk 3 of inode 40"), absl::string_view::npos)
      << read.status();
  // A merge cannot build on bytes it cannot trust.
  EXPECT_EQ(ErrnoFromStatus(Write({40, 3}, 10, "x", false)), EIO);
  // A replace heals it.
  ASSERT_TRUE(Write({40, 3}, 0, "new", true).ok());
  EXPECT_EQ(*ReadAll({40, 3}), "new");
}

TEST_F(ChunkStoreTest, FlippedHeaderByteIsEio) {
  ASSERT_TRUE(Write({41, 0}, 0, Pattern(100, 4), true).ok());
  FlipByte(store_->ChunkPath({41, 0}), 20);  // the data length field
  EXPECT_EQ(ErrnoFromStatus(ReadAll({41, 0}).status()), EIO);
}

TEST_F(ChunkStoreTest, TruncatedOrMisplacedChunkIsEio) {
  ASSERT_TRUE(Write({42, 0}, 0, Pattern(9000, 5), true).ok());
  ASSERT_EQ(::truncate(store_->ChunkPath({42, 0}).c_str(), 8192), 0);
  EXPECT_EQ(ErrnoFromStatus(ReadAll({42, 0}).status()), EIO);
  // A chunk file under another chunk's name.
  ASSERT_TRUE(Write({43, 0}, 0, "zero", true).ok());
  std::filesystem::copy_file(store_->ChunkPath({43, 0}), store_->ChunkPath({43, 1}));
  EXPECT_EQ(ErrnoFromStatus(ReadAll({43, 1}).status()), EIO);
}

TEST_F(ChunkStoreTest, OpenRemovesUnfinishedWritesAndKeepsChunks) {
  ASSERT_TRUE(Write({50, 0}, 0, "durable", true).ok());
  const std::string leftover = dir_.path() + "/tmp/50.1.99";
  std::ofstream(leftover) << "half a chunk";
  store_.reset();
  auto reopened = ChunkStore::Open(dir_.path());
  ASSERT_TRUE(reopened.ok());
  store_ = *std::move(reopened);
  EXPECT_FALSE(std::filesystem::exists(leftover));
  EXPECT_EQ(*ReadAll({50, 0}), "durable");
}

TEST_F(ChunkStoreTest, ConcurrentMergesIntoOneChunkLoseNothing) {
  constexpr int kThreads = 4;
  constexpr int kWrites = 25;
  // Merges land in any order: the chunk is made long enough first, so
  // that none is past its end.
  ASSERT_TRUE(Write({60, 0}, kThreads * kWrites * 10, "", false).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto ring = Ring::Create(8);
      ASSERT_TRUE(ring.ok());
      for (int w = 0; w < kWrites; ++w) {
        const uint32_t offset = static_cast<uint32_t>((w * kThreads + t) * 10);
        ASSERT_TRUE(store_->Write(**ring, {60, 0}, offset, std::string(10, 'a' + t), false).ok());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  auto back = ReadAll({60, 0});
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), size_t{kThreads * kWrites * 10});
  for (int i = 0; i < kThreads * kWrites; ++i) {
    EXPECT_EQ(back->substr(i * 10, 10), std::string(10, 'a' + i % kThreads)) << i;
  }
}

TEST_F(ChunkStoreTest, ReadersSeeWholeVersionsDuringRewrites) {
  // Reads take no lock: every version must still come back whole and
  // checked, never torn or as EIO.
  const std::string a = Pattern(300000, 1);
  const std::string b = Pattern(123457, 2);
  ASSERT_TRUE(Write({70, 0}, 0, a, true).ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    auto ring = Ring::Create(8);
    ASSERT_TRUE(ring.ok());
    for (int i = 0; i < 60; ++i) {
      const std::string& data = i % 2 ? a : b;
      ASSERT_TRUE(store_->Write(**ring, {70, 0}, 0, absl::string_view(data), true).ok());
      // Merges rewrite the chunk too.
      ASSERT_TRUE(
          store_->Write(**ring, {70, 0}, 5, absl::string_view(data.data() + 5, 10), false).ok());
    }
    done = true;
  });
  int reads = 0;
  while (!done || reads < 10) {
    auto back = ReadAll({70, 0});
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_TRUE(*back == a || *back == b) << "torn read of " << back->size() << " bytes";
    ++reads;
  }
  writer.join();
}

TEST_F(ChunkStoreTest, WritesSurviveConcurrentTrimsOfTheInode) {
  // Trim removes the inode directory when it empties; a concurrent write
  // must recreate it rather than fail, however often trims come.
  std::atomic<bool> done{false};
  std::thread trimmer([&] {
    auto ring = Ring::Create(8);
    ASSERT_TRUE(ring.ok());
    while (!done) ASSERT_TRUE(store_->Trim(**ring, 80, 0, 0).ok());
  });
  for (int i = 0; i < 2000; ++i) {
    const absl::Status written = Write({80, static_cast<uint32_t>(i % 3)}, 0, "data", true);
    EXPECT_TRUE(written.ok()) << "write " << i << ": " << written;
    if (!written.ok()) break;
  }
  done = true;
  trimmer.join();
}

TEST_F(ChunkStoreTest, FailedWriteReportsTheErrorAndKeepsTheOldChunk) {
  // A file size limit stands in for a full disk: the data write fails.
  ASSERT_TRUE(Write({90, 0}, 0, "old version", true).ok());
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_action {};
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old_action), 0);
  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::Status failed = Write({90, 0}, 0, Pattern(1 << 20, 9), true);
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &old_action, nullptr);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(ErrnoFromStatus(failed), EFBIG) << failed;
  EXPECT_NE(failed.message().find("chunk 0 of inode 90"), absl::string_view::npos) << failed;
  EXPECT_EQ(*ReadAll({90, 0}), "old version");
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path() + "/tmp"));
}

// Fill: stores the whole chunk only where none is stored (a repair filling a
// missing copy must never overwrite a writer's bytes).
TEST_F(ChunkStoreTest, FillStoresOnlyWhereNoChunkIs) {
  const std::string first = Pattern(9000, 1);
  AlignedBuffer payload;
  ASSERT_TRUE(payload.Reserve(first.size()).ok());
  std::memcpy(payload.data(), first.data(), first.size());
  payload.set_size(first.size());
  ASSERT_TRUE(store_->Fill(*ring_, {8, 0}, payload).ok());
  EXPECT_EQ(*ReadAll({8, 0}), first);

  const std::string writers = Pattern(5000, 2);
  ASSERT_TRUE(Write({8, 1}, 0, writers, true).ok());
  std::memcpy(payload.data(), first.data(), first.size());
  payload.set_size(first.size());
  absl::Status refused = store_->Fill(*ring_, {8, 1}, payload);
  EXPECT_EQ(ErrnoFromStatus(refused), EEXIST) << refused;
  EXPECT_EQ(*ReadAll({8, 1}), writers);

  // A torn chunk counts as stored: the fill must not hide what a repair
  // should look at.
  ASSERT_TRUE(Write({8, 2}, 0, writers, true).ok());
  FlipByte(store_->ChunkPath({8, 2}), kChunkHeaderSize + 3);
  std::memcpy(payload.data(), first.data(), first.size());
  payload.set_size(first.size());
  EXPECT_EQ(ErrnoFromStatus(store_->Fill(*ring_, {8, 2}, payload)), EEXIST);
}

TEST_F(ChunkStoreTest, ForEachChunkVisitsEveryStoredChunkAndStopsWhenAsked) {
  std::set<std::pair<uint64_t, uint32_t>> written;
  for (uint64_t ino : {3, 70, 1234567}) {
    for (uint32_t index : {0u, 1u, 9u}) {
      ASSERT_TRUE(Write({ino, index}, 0, Pattern(100, static_cast<int>(index)), true).ok());
      written.insert({ino, index});
    }
  }
  ASSERT_TRUE(store_->Trim(*ring_, 70, 0, 4096).ok());
  for (uint32_t index : {0u, 1u, 9u}) written.erase({70, index});
  std::set<std::pair<uint64_t, uint32_t>> seen;
  ASSERT_TRUE(store_
                  ->ForEachChunk([&](ChunkKey key) {
                    seen.insert({key.ino, key.index});
                    return true;
                  })
                  .ok());
  EXPECT_EQ(seen, written);
  int visits = 0;
  ASSERT_TRUE(store_->ForEachChunk([&](ChunkKey) { return ++visits < 2; }).ok());
  EXPECT_EQ(visits, 2);
}

TEST_F(ChunkStoreTest, ScrubPassesGoodChunksAndQuarantinesACorruptOne) {
  const std::string data = Pattern(20000, 4);
  ASSERT_TRUE(Write({9, 0}, 0, data, true).ok());
  ASSERT_TRUE(Write({9, 1}, 0, data, true).ok());
  AlignedBuffer buffer;
  auto good = store_->Scrub(*ring_, buffer, {9, 0});
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->verdict, ScrubVerdict::kGood);
  EXPECT_GE(good->bytes_read, data.size());

  FlipByte(store_->ChunkPath({9, 1}), kChunkHeaderSize + 12345);
  auto bad = store_->Scrub(*ring_, buffer, {9, 1});
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_EQ(bad->verdict, ScrubVerdict::kQuarantined);
  // Set aside, so a read now says "not here" (a client asks another copy)
  // and a repair may fill it again.
  EXPECT_EQ(ErrnoFromStatus(ReadAll({9, 1}).status()), ENOENT);
  std::vector<std::string> aside;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/quarantine")) {
    aside.push_back(entry.path().filename().string());
  }
  ASSERT_EQ(aside.size(), 1u);
  EXPECT_EQ(aside[0].rfind("9.1.", 0), 0u) << aside[0];
  AlignedBuffer refill;
  ASSERT_TRUE(refill.Reserve(data.size()).ok());
  std::memcpy(refill.data(), data.data(), data.size());
  refill.set_size(data.size());
  ASSERT_TRUE(store_->Fill(*ring_, {9, 1}, refill).ok());
  EXPECT_EQ(*ReadAll({9, 1}), data);
  EXPECT_EQ(*ReadAll({9, 0}), data);

  auto gone = store_->Scrub(*ring_, buffer, {9, 7});
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->verdict, ScrubVerdict::kGone);
}

TEST_F(ChunkStoreTest, ReportsSpace) {
  auto space = store_->Space();
  ASSERT_TRUE(space.ok());
  EXPECT_GT(space->capacity_bytes, 0u);
  EXPECT_LE(space->used_bytes, space->capacity_bytes);
}

}  // namespace
}  // namespace ckptfs::storage
