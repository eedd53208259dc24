// Tests of DataPattern: a pure function of (seed, rank, file, offset) whose
// pages name themselves, checked at memory speed.
#include "bench/data_pattern.h"

#include <isa-l/crc.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "bench/workload_buffers.h"
#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

std::vector<uint8_t> Bytes(const DataPattern& p, uint64_t offset, size_t size) {
  std::vector<uint8_t> out(size);
  p.Fill(offset, out.data(), size);
  return out;
}

TEST(DataPattern, FillDependsOnlyOnOffset) {
  const DataPattern p(7, 3, 1);
  const std::vector<uint8_t> whole = Bytes(p, 0, 3 << 20);
  for (uint64_t start : {0ull, 1ull, 15ull, 16ull, 4095ull, 12345ull, 1048573ull, 2097152ull}) {
    for (size_t size : {1ul, 17ul, 4096ul, 100000ul}) {
      if (start + size > whole.size()) continue;
      std::vector<uint8_t> piece = Bytes(p, start, size);
      ASSERT_EQ(0, std::memcmp(piece.data(), whole.data() + start, size))
          << "start " << start << " size " << size;
    }
  }
  const DataPattern again(7, 3, 1);
  EXPECT_EQ(Bytes(again, 777, 9000), Bytes(p, 777, 9000));
}

TEST(DataPattern, SeedRankAndFileChangeTheBytes) {
  const std::vector<uint8_t> base = Bytes(DataPattern(1, 0, 0), 0, 1 << 16);
  EXPECT_NE(base, Bytes(DataPattern(2, 0, 0), 0, 1 << 16));
  EXPECT_NE(base, Bytes(DataPattern(1, 1, 0), 0, 1 << 16));
  EXPECT_NE(base, Bytes(DataPattern(1, 0, 1), 0, 1 << 16));
}

TEST(DataPattern, TheSameOffsetInAnotherPageOrMebibyteDiffers) {
  // A misplaced sector is caught even where no stamp is.
  const DataPattern p(1, 0, 0);
  EXPECT_NE(Bytes(p, 512, 512), Bytes(p, 4096 + 512, 512));
  EXPECT_NE(Bytes(p, 512, 512), Bytes(p, (1 << 20) + 512, 512));
  EXPECT_NE(Bytes(p, 512, 512), Bytes(p, (64 << 20) + 512, 512));
}

TEST(DataPattern, StampsNameTheirPage) {
  const DataPattern p(9, 17, 0x102);
  const std::vector<uint8_t> page = Bytes(p, 5 * DataPattern::kPageBytes, 16);
  std::optional<DataPattern::Stamp> stamp = DataPattern::DecodeStamp(page.data());
  ASSERT_TRUE(stamp.has_value());
  EXPECT_EQ(stamp->page, 5u);
  EXPECT_EQ(stamp->rank, 17u);
  EXPECT_EQ(stamp->file, 0x102u);
  EXPECT_EQ(DataPattern::DescribeForeignPage(page.data()),
            "the page there holds rank 17 file 258 page 5 (offset 20480)");
  const std::vector<uint8_t> middle = Bytes(p, 5 * DataPattern::kPageBytes + 100, 16);
  EXPECT_FALSE(DataPattern::DecodeStamp(middle.data()).has_value());
}

TEST(DataPattern, FirstMismatchFindsTheExactByte) {
  const DataPattern p(4, 2, 0);
  const uint64_t offset = 3000;  // crosses a page boundary and its stamp
  std::vector<uint8_t> data = Bytes(p, offset, 20000);
  EXPECT_FALSE(p.FirstMismatch(offset, data.data(), data.size()).has_value());
  for (size_t bad : {0ul, 1095ul, 1096ul, 1100ul, 1111ul, 1112ul, 19999ul}) {
    std::vector<uint8_t> copy = data;
    copy[bad] ^= 0x40;
    std::optional<size_t> found = p.FirstMismatch(offset, copy.data(), copy.size());
    ASSERT_TRUE(found.has_value()) << bad;
    EXPECT_EQ(*found, bad);
    EXPECT_EQ(p.ExpectedByte(offset + bad), data[bad]);
  }
  // Another rank's bytes at the same place are caught in the first page.
  const std::vector<uint8_t> other = Bytes(DataPattern(4, 3, 0), offset, 20000);
  EXPECT_TRUE(p.FirstMismatch(offset, other.data(), other.size()).has_value());
}

// Generates and verifies 256 MiB in a 16 MiB reused buffer and reports the
// speed (no timing assertion: the machine is shared).
TEST(DataPattern, GeneratesAndVerifiesAtMemorySpeed) {
  const DataPattern p(1, 0, 0);
  constexpr size_t kChunk = 16 << 20;
  constexpr uint64_t kTotal = uint64_t{256} << 20;
  ScratchBuffer buffer = ScratchBuffer::Acquire(kChunk);
  std::memset(buffer.data(), 0, kChunk);  // touch it first
  double fill_s = 0;
  double verify_s = 0;
  double crc_s = 0;
  uint32_t crc = 0;
  for (uint64_t offset = 0; offset < kTotal; offset += kChunk) {
    auto t0 = std::chrono::steady_clock::now();
    p.Fill(offset, buffer.data(), kChunk);
    auto t1 = std::chrono::steady_clock::now();
    ASSERT_FALSE(p.FirstMismatch(offset, buffer.data(), kChunk).has_value());
    auto t2 = std::chrono::steady_clock::now();
    crc = crc32_gzip_refl(crc, buffer.data(), kChunk);  // what torch and dcp add
    auto t3 = std::chrono::steady_clock::now();
    fill_s += std::chrono::duration<double>(t1 - t0).count();
    verify_s += std::chrono::duration<double>(t2 - t1).count();
    crc_s += std::chrono::duration<double>(t3 - t2).count();
  }
  const double fill_gbs = kTotal / fill_s / 1e9;
  const double verify_gbs = kTotal / verify_s / 1e9;
  const double crc_gbs = kTotal / crc_s / 1e9;
  RecordProperty("fill_gb_per_s", std::to_string(fill_gbs));
  RecordProperty("verify_gb_per_s", std::to_string(verify_gbs));
  RecordProperty("zip_crc_gb_per_s", std::to_string(crc_gbs));
  std::printf("pattern: generate %.2f GB/s, verify %.2f GB/s, zip CRC %.2f GB/s (one core)\n",
              fill_gbs, verify_gbs, crc_gbs);
}

}  // namespace
}  // namespace ckptfs::bench
