// See data_pattern.h.
#include "bench/data_pattern.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace ckptfs::bench {
namespace {

constexpr uint64_t kStampMagic = 0xC4;

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void StoreLe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

DataPattern::DataPattern(uint64_t seed, uint32_t rank, uint32_t file)
    : seed_(seed), rank_(rank), file_(file), base_(new uint8_t[kPeriod + kPageBytes]) {
  // xoshiro256+ seeded through splitmix64 from (seed, rank): fast and with
  // no visible structure at this scale.
  uint64_t sm = seed * 0x2545F4914F6CDD1DULL ^ (uint64_t{rank} << 1 | 1);
  uint64_t s[4];
  for (uint64_t& word : s) word = SplitMix64(sm);
  uint8_t* out = base_.get();
  const uint64_t words = (kPeriod + 7) / 8;
  for (uint64_t i = 0; i < words; ++i) {
    const uint64_t result = s[0] + s[3];
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    uint8_t bytes[8];
    StoreLe64(bytes, result);
    const size_t n = std::min<uint64_t>(8, kPeriod - i * 8);
    std::memcpy(out + i * 8, bytes, n);
  }
  std::memcpy(out + kPeriod, out, kPageBytes);
  uint64_t seed_mix = seed;
  const uint64_t seed_byte = SplitMix64(seed_mix) & 0xFF;
  stamp_word2_ = (kStampMagic << 56) | (seed_byte << 48) | (uint64_t{rank & 0xFFFFFFu} << 24) |
                 uint64_t{file & 0xFFFFFFu};
}

void DataPattern::StampBytes(uint64_t page, uint8_t out[kStampBytes]) const {
  StoreLe64(out, page);
  StoreLe64(out + 8, stamp_word2_);
}

std::optional<DataPattern::Stamp> DataPattern::DecodeStamp(const uint8_t bytes[kStampBytes]) {
  const uint64_t word2 = LoadLe64(bytes + 8);
  if ((word2 >> 56) != kStampMagic) return std::nullopt;
  Stamp stamp;
  stamp.page = LoadLe64(bytes);
  stamp.rank = static_cast<uint32_t>((word2 >> 24) & 0xFFFFFF);
  stamp.file = static_cast<uint32_t>(word2 & 0xFFFFFF);
  return stamp;
}

std::string DataPattern::DescribeForeignPage(const uint8_t page_bytes[kStampBytes]) {
  std::optional<Stamp> stamp = DecodeStamp(page_bytes);
  if (!stamp.has_value()) return "";
  return absl::StrFormat("the page there holds rank %u file %u page %u (offset %u)", stamp->rank,
                         stamp->file, stamp->page, stamp->page * kPageBytes);
}

void DataPattern::Fill(uint64_t offset, void* dst, size_t size) const {
  auto* out = static_cast<uint8_t*>(dst);
  while (size > 0) {
    const uint64_t in_page = offset % kPageBytes;
    size_t n = static_cast<size_t>(std::min<uint64_t>(size, kPageBytes - in_page));
    if (in_page < kStampBytes) {
      uint8_t stamp[kStampBytes];
      StampBytes(offset / kPageBytes, stamp);
      const size_t s = std::min<size_t>(n, kStampBytes - in_page);
      std::memcpy(out, stamp + in_page, s);
      out += s;
      offset += s;
      size -= s;
      n -= s;
    }
    if (n > 0) {
      std::memcpy(out, base_.get() + offset % kPeriod, n);
      out += n;
      offset += n;
      size -= n;
    }
  }
}

uint8_t DataPattern::ExpectedByte(uint64_t offset) const {
  uint8_t byte;
  Fill(offset, &byte, 1);
  return byte;
}

std::optional<size_t> DataPattern::FirstMismatch(uint64_t offset, const void* data,
                                                 size_t size) const {
  const auto* in = static_cast<const uint8_t*>(data);
  size_t done = 0;
  auto scan = [&](const uint8_t* expected, size_t n) -> std::optional<size_t> {
    for (size_t i = 0; i < n; ++i) {
      if (in[done + i] != expected[i]) return done + i;
    }
    return std::nullopt;  // unreachable after a failed memcmp
  };
  while (done < size) {
    const uint64_t in_page = offset % kPageBytes;
    size_t n = static_cast<size_t>(std::min<uint64_t>(size - done, kPageBytes - in_page));
    if (in_page < kStampBytes) {
      uint8_t stamp[kStampBytes];
      StampBytes(offset / kPageBytes, stamp);
      const size_t s = std::min<size_t>(n, kStampBytes - in_page);
      if (std::memcmp(in + done, stamp + in_page, s) != 0) return scan(stamp + in_page, s);
      done += s;
      offset += s;
      n -= s;
    }
    if (n > 0) {
      const uint8_t* expected = base_.get() + offset % kPeriod;
      if (std::memcmp(in + done, expected, n) != 0) return scan(expected, n);
      done += n;
      offset += n;
    }
  }
  return std::nullopt;
}

}  // namespace ckptfs::bench
