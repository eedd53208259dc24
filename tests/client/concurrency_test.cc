// Threads over the in-process service and the fake transport
// (client_fixture.h): concurrent writers of different files, concurrent
// readers of one file (which share fetched chunks), and concurrent writers
// of disjoint ranges of one file.
#include <fcntl.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/file.h"
#include "gtest/gtest.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

class ConcurrencyTest : public ClientFixture {
 protected:
  // Opens `count` read-only handles of `ino` into `handles`.
  void OpenReaders(uint64_t ino, int count, std::vector<std::unique_ptr<File>>* handles) {
    for (int i = 0; i < count; ++i) {
      auto opened = client_->Open(ino, O_RDONLY);
      ASSERT_TRUE(opened.ok()) << opened.status();
      handles->push_back(*std::move(opened));
    }
  }
};

TEST_F(ConcurrencyTest, SixteenWritersOfDifferentFiles) {
  constexpr int kWriters = 16;
  std::vector<std::string> data(kWriters);
  std::vector<uint64_t> inos(kWriters, 0);
  for (int i = 0; i < kWriters; ++i) data[i] = RandomBytes(5ull * kTestChunk + 123 * i, 1000 + i);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      auto created = client_->Create(kRootIno, "w" + std::to_string(i), 0644, 0, 0,
                                     O_WRONLY | O_CREAT | O_TRUNC);
      if (!created.ok()) {
        ++failures;
        return;
      }
      inos[i] = created->file->ino();
      for (size_t done = 0; done < data[i].size();) {
        const size_t n = std::min<size_t>(30000, data[i].size() - done);
        if (!created->file->Write(done, data[i].data() + done, n).ok()) ++failures;
        done += n;
      }
      if (!created->file->Close().ok()) ++failures;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  for (int i = 0; i < kWriters; ++i) {
    EXPECT_EQ(service_->RecordedSize(inos[i]), data[i].size());
    EXPECT_TRUE(SameBytes(ReadAll(inos[i]), data[i])) << "file " << i;
  }
}

TEST_F(ConcurrencyTest, SixteenReadersOfOneFileShareChunks) {
  constexpr int kReaders = 16;
  constexpr uint64_t kChunks = 24;
  auto file = CreateFile("shared");
  const uint64_t ino = file->ino();
  const std::string data = RandomBytes(kChunks * kTestChunk - 9, 77);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  transport_->SetDelay(absl::Milliseconds(3));
  const int reads_before = transport_->counts().reads;

  std::vector<std::unique_ptr<File>> handles;
  ASSERT_NO_FATAL_FAILURE(OpenReaders(ino, kReaders, &handles));
  absl::Barrier* start = new absl::Barrier(kReaders);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kReaders; ++i) {
    threads.emplace_back([&, i] {
      if (start->Block()) delete start;
      std::string got(data.size(), '\0');
      size_t done = 0;
      while (done < got.size()) {
        auto n = handles[i]->Read(done, got.data() + done, 131072);
        if (!n.ok() || *n == 0) break;
        done += *n;
      }
      if (done != data.size() || got != data) ++mismatches;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  const int fetched = transport_->counts().reads - reads_before;
  RecordProperty("chunk_reads", fetched);
  // Each reader fetching everything would be kReaders * kChunks; readers in
  // step share every fetch (kChunks), and a straggler the cache has moved
  // past may fetch again.
  EXPECT_LT(fetched, static_cast<int>(kReaders * kChunks / 2)) << fetched << " chunk reads";
  for (auto& handle : handles) ASSERT_TRUE(handle->Close().ok());
}

// Four handles of one file read it in turn, each a few chunks behind the
// one before (ranks of a node loading one shard without a page cache
// between them): with a read-ahead window kept per handle every chunk is
// fetched once; with the default cache the trailing readers fetch again.
TEST_F(ConcurrencyTest, StaggeredReadersShareFetchesWithAWindowPerHandle) {
  constexpr int kReaders = 4;
  constexpr uint64_t kChunks = 16;
  constexpr uint64_t kLag = 4;  // chunks between one reader and the next
  for (const bool window_per_handle : {true, false}) {
    SCOPED_TRACE(window_per_handle ? "window per handle" : "default");
    ClientOptions options = DefaultOptions();
    options.read_window_per_handle = window_per_handle;
    MakeClient(options);
    auto file = CreateFile("staggered");
    const uint64_t ino = file->ino();
    const std::string data = RandomBytes(kChunks * kTestChunk, 5);
    ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
    ASSERT_TRUE(file->Close().ok());
    const int reads_before = transport_->counts().reads;
    std::vector<std::unique_ptr<File>> handles;
    ASSERT_NO_FATAL_FAILURE(OpenReaders(ino, kReaders, &handles));
    std::string got(kTestChunk, '\0');
    for (uint64_t step = 0; step < kChunks + kLag * (kReaders - 1); ++step) {
      for (int i = 0; i < kReaders; ++i) {
        if (step < kLag * i || step - kLag * i >= kChunks) continue;
        const uint64_t offset = (step - kLag * i) * kTestChunk;
        auto n = handles[i]->Read(offset, got.data(), kTestChunk);
        ASSERT_TRUE(n.ok()) << n.status();
        ASSERT_EQ(*n, kTestChunk);
        ASSERT_TRUE(got == data.substr(offset, kTestChunk)) << "reader " << i << " at " << offset;
      }
    }
    for (auto& handle : handles) ASSERT_TRUE(handle->Close().ok());
    const int fetched = transport_->counts().reads - reads_before;
    if (window_per_handle) {
      EXPECT_EQ(fetched, static_cast<int>(kChunks));
    } else {
      EXPECT_GT(fetched, static_cast<int>(kChunks));
    }
  }
}

TEST_F(ConcurrencyTest, WritersOfDisjointRangesOfOneFile) {
  constexpr int kWriters = 8;
  constexpr size_t kSlice = kTestChunk + 4321;  // slices straddle chunk boundaries
  auto file = CreateFile("slices");
  const uint64_t ino = file->ino();
  const std::string data = RandomBytes(kWriters * kSlice, 99);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i) {
    threads.emplace_back([&, i] {
      auto handle = client_->Open(ino, O_WRONLY);
      if (!handle.ok()) {
        ++failures;
        return;
      }
      for (size_t done = 0; done < kSlice;) {
        const size_t n = std::min<size_t>(5000, kSlice - done);
        const size_t at = i * kSlice + done;
        if (!(*handle)->Write(at, data.data() + at, n).ok()) ++failures;
        done += n;
      }
      if (!(*handle)->Close().ok()) ++failures;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(service_->RecordedSize(ino), data.size());
  EXPECT_TRUE(SameBytes(ReadAll(ino), data));
}

TEST_F(ConcurrencyTest, ConcurrentAppendsStayWhole) {
  constexpr int kThreads = 8;
  constexpr int kRecords = 100;
  constexpr size_t kRecord = 1000;  // records straddle chunk boundaries
  auto file = CreateFile("log");
  const uint64_t ino = file->ino();
  ASSERT_TRUE(file->Close().ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto appender = client_->Open(ino, O_WRONLY | O_APPEND);
      if (!appender.ok()) {
        ++failures;
        return;
      }
      for (int r = 0; r < kRecords; ++r) {
        std::string record(kRecord, static_cast<char>('a' + t));
        record.replace(0, 8, absl::StrFormat("%02d:%05d", t, r));
        if (!(*appender)->Write(0, record.data(), record.size()).ok()) ++failures;
      }
      if (!(*appender)->Close().ok()) ++failures;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  const std::string all = ReadAll(ino);
  ASSERT_EQ(all.size(), kThreads * kRecords * kRecord);
  std::vector<int> next(kThreads, 0);
  for (size_t at = 0; at < all.size(); at += kRecord) {
    const int t = (all[at] - '0') * 10 + (all[at + 1] - '0');
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(all.substr(at, 8), absl::StrFormat("%02d:%05d", t, next[t]++)) << "at " << at;
    EXPECT_EQ(all.substr(at + 8, kRecord - 8), std::string(kRecord - 8, 'a' + t)) << "at " << at;
  }
}

// A read-ahead that fetches a chunk whose write is queued behind the
// in-flight cap (or still in flight) must not leave the old bytes cached
// once that write lands.
TEST_F(ConcurrencyTest, ReadAheadDuringQueuedWriteDoesNotCacheOldBytes) {
  ClientOptions options = DefaultOptions();
  options.max_inflight_chunks_per_file = 1;
  options.readahead_chunks = 3;
  MakeClient(options);
  constexpr uint64_t kChunks = 4;
  auto file = CreateFile("racy");
  const uint64_t ino = file->ino();
  const std::string old_data(kChunks * kTestChunk, 'a');
  ASSERT_TRUE(file->Write(0, old_data.data(), old_data.size()).ok());
  ASSERT_TRUE(file->Flush().ok());
  auto reader = client_->Open(ino, O_RDONLY);
  ASSERT_TRUE(reader.ok());

  // Every request takes kDelay. The reader fetches chunk 0 during [0, D]
  // and then reads ahead chunks 1..3; the writer, starting at D/2, has
  // chunk 2 in flight and chunk 3 queued behind it until 3D/2, and chunk 3
  // lands at 5D/2, after the read-ahead fetched it at 2D.
  constexpr absl::Duration kDelay = absl::Milliseconds(200);
  transport_->SetDelay(kDelay);
  const std::string new_data(2 * kTestChunk, 'b');
  std::thread writer([&] {
    absl::SleepFor(kDelay / 2);
    EXPECT_TRUE(file->Write(2 * kTestChunk, new_data.data(), new_data.size()).ok());
  });
  std::string got(kTestChunk, '\0');
  auto n = (*reader)->Read(0, got.data(), got.size());
  ASSERT_TRUE(n.ok()) << n.status();
  writer.join();
  ASSERT_TRUE(file->Flush().ok());
  absl::SleepFor(3 * kDelay);  // the read-ahead has finished
  transport_->SetDelay(absl::ZeroDuration());

  for (uint64_t index = 1; index < kChunks; ++index) {
    n = (*reader)->Read(index * kTestChunk, got.data(), got.size());
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_EQ(*n, got.size());
    const char want = index >= 2 ? 'b' : 'a';
    EXPECT_TRUE(SameBytes(got, std::string(kTestChunk, want))) << "chunk " << index;
  }
  ASSERT_TRUE((*reader)->Close().ok());
  ASSERT_TRUE(file->Close().ok());
}

}  // namespace
}  // namespace ckptfs::client
