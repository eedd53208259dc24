// Scrubber on a real ChunkStore: a pass checks every stored chunk, sets a
// corrupt one aside (it then reads as missing) and counts it; good chunks
// stay; Stop ends a slow pass without waiting it out.
#include "server/storage/scrubber.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

class ScrubberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ChunkStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto ring = Ring::Create(8);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
  }

  void Put(ChunkKey key, size_t size) {
    ASSERT_TRUE(store_
                    ->Write(*ring_, key, 0, std::string(size, static_cast<char>('a' + key.index)),
                            /*replace=*/true)
                    .ok());
  }

  void Corrupt(ChunkKey key) {
    const std::string path = store_->ChunkPath(key);
    const int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << path;
    const char junk = '\x5a';
    ASSERT_EQ(::pwrite(fd, &junk, 1, kChunkHeaderSize + 100), 1);
    ::close(fd);
  }

  absl::StatusCode ReadCode(ChunkKey key) {
    return store_->Read(*ring_, buffer_, key, 0, kMaxChunkLength).status().code();
  }

  TempDir dir_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Ring> ring_;
  AlignedBuffer buffer_;
};

TEST_F(ScrubberTest, APassFindsTheFlippedChunkSetsItAsideAndKeepsTheRest) {
  for (uint32_t i = 0; i < 6; ++i) ASSERT_NO_FATAL_FAILURE(Put({21, i}, 5000 + 100 * i));
  ASSERT_NO_FATAL_FAILURE(Put({22, 0}, 70000));
  ASSERT_NO_FATAL_FAILURE(Corrupt({21, 4}));

  Scrubber::Options options;
  options.bytes_per_s = uint64_t{1} << 30;
  options.first_pass_delay = absl::ZeroDuration();
  options.pass_interval = absl::Hours(1);
  auto scrubber = Scrubber::Start(options, *store_);
  ASSERT_TRUE(scrubber.ok()) << scrubber.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*scrubber)->Report().passes_completed() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  (*scrubber)->Stop();
  const meta::ScrubReport report = (*scrubber)->Report();
  ASSERT_EQ(report.passes_completed(), 1u);
  EXPECT_EQ(report.chunks_checked(), 7u);
  EXPECT_EQ(report.corrupt_found(), 1u);
  EXPECT_GE(report.bytes_checked(), 6u * 5000 + 70000);
  EXPECT_GT(report.last_pass_end_ms(), 0);
  EXPECT_EQ(report.bytes_per_s_limit(), uint64_t{1} << 30);

  EXPECT_EQ(ErrnoFromStatus(store_->Read(*ring_, buffer_, {21, 4}, 0, 10).status()), ENOENT);
  for (uint32_t i : {0u, 1u, 2u, 3u, 5u}) EXPECT_EQ(ReadCode({21, i}), absl::StatusCode::kOk);
  EXPECT_EQ(ReadCode({22, 0}), absl::StatusCode::kOk);
}

TEST_F(ScrubberTest, StopEndsASlowPassAndOffRunsNothing) {
  for (uint32_t i = 0; i < 4; ++i) ASSERT_NO_FATAL_FAILURE(Put({5, i}, 4096));
  Scrubber::Options slow;
  slow.bytes_per_s = 1;  // would take hours for one chunk
  slow.first_pass_delay = absl::ZeroDuration();
  auto scrubber = Scrubber::Start(slow, *store_);
  ASSERT_TRUE(scrubber.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*scrubber)->Report().chunks_checked() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  (*scrubber)->Stop();  // must not wait out the pace
  EXPECT_EQ((*scrubber)->Report().chunks_checked(), 1u);
  EXPECT_EQ((*scrubber)->Report().passes_completed(), 0u);

  Scrubber::Options off;
  off.bytes_per_s = 0;
  off.first_pass_delay = absl::ZeroDuration();
  auto idle = Scrubber::Start(off, *store_);
  ASSERT_TRUE(idle.ok());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ((*idle)->Report().chunks_checked(), 0u);
  EXPECT_EQ((*idle)->Report().bytes_per_s_limit(), 0u);
}

}  // namespace
}  // namespace ckptfs::storage
