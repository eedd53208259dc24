// DataPattern: the payload bytes of one benchmark rank, a pure function of
// (seed, rank, file, offset), produced and checked at memory speed.
//
// Byte o of file f of rank r is
//   - inside the first kStampBytes of each kPageBytes page: the page's stamp,
//     16 bytes naming (page index, rank, file) (see Stamp), so a page that
//     lands in the wrong file, rank or place is caught and named;
//   - elsewhere: base[o mod kPeriod], where base is kPeriod random bytes
//     drawn from (seed, rank). kPeriod is prime, so the same offset within
//     two pages or two MiB reads different base bytes and a misplaced sector
//     is caught too.
// Offsets are absolute file offsets: container formats (torch, dcp) place
// payload at any offset and the bytes there are still P(offset).
//
// Generation is a memcpy from the (cache-resident) base plus one stamp per
// page; verification is a memcmp against the same, no expected buffer.
//
// Thread-safety: a DataPattern is immutable after construction and may be
// shared; it owns its base block (about 1 MiB).
#ifndef CKPTFS_BENCH_DATA_PATTERN_H_
#define CKPTFS_BENCH_DATA_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace ckptfs::bench {

class DataPattern {
 public:
  static constexpr uint64_t kPageBytes = 4096;
  static constexpr uint64_t kStampBytes = 16;
  // The largest prime below 2^20.
  static constexpr uint64_t kPeriod = 1048573;

  // What a page's stamp says.
  struct Stamp {
    uint64_t page = 0;  // offset / kPageBytes
    uint32_t rank = 0;  // low 24 bits
    uint32_t file = 0;  // low 24 bits
  };

  // `file` identifies the file among all the rank's files (any value; the
  // low 24 bits are stamped).
  DataPattern(uint64_t seed, uint32_t rank, uint32_t file);
  DataPattern(const DataPattern&) = delete;
  DataPattern& operator=(const DataPattern&) = delete;

  uint64_t seed() const { return seed_; }
  uint32_t rank() const { return rank_; }
  uint32_t file() const { return file_; }

  // Writes P(offset .. offset+size) to dst.
  void Fill(uint64_t offset, void* dst, size_t size) const;

  // The index (0-based, relative to `data`) of the first byte of
  // data[0, size) that differs from P(offset ..), or nullopt if none does.
  std::optional<size_t> FirstMismatch(uint64_t offset, const void* data, size_t size) const;

  // The expected byte at `offset`.
  uint8_t ExpectedByte(uint64_t offset) const;

  // The 16-byte stamp of `page` for this rank and file.
  void StampBytes(uint64_t page, uint8_t out[kStampBytes]) const;
  // Decodes a stamp; nullopt if `bytes` do not look like one.
  static std::optional<Stamp> DecodeStamp(const uint8_t bytes[kStampBytes]);

  // A human description of what a wrong page holds when its first bytes are
  // `page_bytes` (kStampBytes of them), e.g. "the page holds rank 3 file 0
  // page 17", or "" when they are not a stamp.
  static std::string DescribeForeignPage(const uint8_t page_bytes[kStampBytes]);

 private:
  const uint64_t seed_;
  const uint32_t rank_;
  const uint32_t file_;
  // kPeriod + kPageBytes bytes: base[kPeriod + i] == base[i], so any run of
  // at most kPageBytes starting below kPeriod is contiguous.
  std::unique_ptr<uint8_t[]> base_;
  uint64_t stamp_word2_ = 0;
};

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_DATA_PATTERN_H_
