// See workload_streams.h.
#include "bench/workload_streams.h"

#include <isa-l/crc.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ckptfs::bench {
namespace {

// The zip CRC-32 (reflected IEEE, as zlib's crc32) of data, extending `crc`.
uint32_t ZipCrc(uint32_t crc, const uint8_t* data, uint64_t size) {
  return crc32_gzip_refl(crc, data, size);
}

// The largest piece one Write may carry.
uint64_t PieceCap(uint64_t max_write_bytes) {
  uint64_t cap = kMaxRwCount;
  // At least 64 KiB so that the 8 KiB stream buffers always fit in front.
  if (max_write_bytes > 0) cap = std::min(cap, std::max<uint64_t>(max_write_bytes, 64 << 10));
  return cap;
}

absl::Status Emit(const WriteTarget& target, const uint8_t* data, size_t size) {
  if (size == 0) return absl::OkStatus();
  absl::Status status = target.io->Write(target.handle, data, size);
  if (!status.ok()) return status;
  if (target.progress != nullptr) target.progress->OnBytes(size);
  return absl::OkStatus();
}

}  // namespace

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

size_t WriteBufferBytes(uint64_t largest_payload, uint64_t max_write_bytes) {
  return static_cast<size_t>(8192 + std::min(largest_payload, PieceCap(max_write_bytes)));
}

// --- CountingSink ----------------------------------------------------------

absl::Status CountingSink::Literal(absl::string_view bytes) {
  offset_ += bytes.size();
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> CountingSink::Payload(uint64_t size, bool want_crc) {
  offset_ += size;
  return 0u;
}

// --- CxxFilebufSink --------------------------------------------------------

CxxFilebufSink::CxxFilebufSink(WriteTarget target, ScratchBuffer& buffer)
    : target_(std::move(target)), buffer_(buffer) {}

absl::Status CxxFilebufSink::WriteOut(const uint8_t* data, size_t size) {
  return Emit(target_, data, size);
}

absl::Status CxxFilebufSink::Literal(absl::string_view bytes) {
  const size_t n = bytes.size();
  const size_t limit = std::min<size_t>(1024, kBufferBytes - pending_);
  uint8_t* buf = buffer_.data();
  if (n < limit) {
    std::memcpy(buf + pending_, bytes.data(), n);
    pending_ += n;
    offset_ += n;
    return absl::OkStatus();
  }
  // writev(buffered, bytes): one Write when both fit in the buffer.
  absl::Status status;
  if (pending_ + n <= buffer_.size()) {
    std::memcpy(buf + pending_, bytes.data(), n);
    status = WriteOut(buf, pending_ + n);
  } else {
    status = WriteOut(buf, pending_);
    if (status.ok()) {
      status = WriteOut(reinterpret_cast<const uint8_t*>(bytes.data()), n);
    }
  }
  pending_ = 0;
  offset_ += n;
  return status;
}

absl::StatusOr<uint32_t> CxxFilebufSink::Payload(uint64_t size, bool want_crc) {
  uint8_t* buf = buffer_.data();
  uint32_t crc = 0;
  const size_t limit = std::min<size_t>(1024, kBufferBytes - pending_);
  if (size < limit) {
    target_.pattern->Fill(offset_, buf + pending_, size);
    if (want_crc) crc = ZipCrc(0, buf + pending_, size);
    pending_ += size;
    offset_ += size;
    return crc;
  }
  // One writev of the buffered bytes and the whole storage; the kernel (and
  // max_write_bytes) cut it into pieces.
  const uint64_t cap = PieceCap(target_.max_write_bytes);
  uint64_t remaining = size;
  while (remaining > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining, cap - pending_));
    target_.pattern->Fill(offset_, buf + pending_, n);
    if (want_crc) crc = ZipCrc(crc, buf + pending_, n);
    absl::Status status = WriteOut(buf, pending_ + n);
    if (!status.ok()) return status;
    pending_ = 0;
    offset_ += n;
    remaining -= n;
  }
  return crc;
}

absl::Status CxxFilebufSink::Close() {
  absl::Status status = WriteOut(buffer_.data(), pending_);
  pending_ = 0;
  return status;
}

// --- PyBufferedSink --------------------------------------------------------

PyBufferedSink::PyBufferedSink(WriteTarget target, ScratchBuffer& buffer)
    : target_(std::move(target)), buffer_(buffer) {}

absl::Status PyBufferedSink::WriteOut(const uint8_t* data, size_t size) {
  return Emit(target_, data, size);
}

absl::Status PyBufferedSink::Flush() {
  absl::Status status = WriteOut(buffer_.data(), pending_);
  pending_ = 0;
  return status;
}

absl::Status PyBufferedSink::Literal(absl::string_view bytes) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  uint64_t remaining = bytes.size();
  uint8_t* buf = buffer_.data();
  if (remaining <= kBufferBytes - pending_) {
    std::memcpy(buf + pending_, data, remaining);
    pending_ += remaining;
    offset_ += remaining;
    return absl::OkStatus();
  }
  if (absl::Status status = Flush(); !status.ok()) return status;
  const uint64_t cap = PieceCap(target_.max_write_bytes);
  while (remaining > kBufferBytes) {
    const size_t n = static_cast<size_t>(std::min(remaining, cap));
    if (absl::Status status = WriteOut(data, n); !status.ok()) return status;
    data += n;
    offset_ += n;
    remaining -= n;
  }
  std::memcpy(buf, data, remaining);
  pending_ = remaining;
  offset_ += remaining;
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> PyBufferedSink::Payload(uint64_t size, bool want_crc) {
  uint8_t* buf = buffer_.data();
  uint32_t crc = 0;
  uint64_t remaining = size;
  if (remaining <= kBufferBytes - pending_) {
    target_.pattern->Fill(offset_, buf + pending_, remaining);
    if (want_crc) crc = ZipCrc(0, buf + pending_, remaining);
    pending_ += remaining;
    offset_ += remaining;
    return crc;
  }
  if (absl::Status status = Flush(); !status.ok()) return status;
  // BufferedWriter writes the whole object with one raw write (the kernel
  // and max_write_bytes cut it); a remainder of at most 8 KiB is buffered.
  const uint64_t cap = PieceCap(target_.max_write_bytes);
  uint8_t* out = buf + kBufferBytes;
  while (remaining > kBufferBytes) {
    const size_t n = static_cast<size_t>(std::min(remaining, cap));
    target_.pattern->Fill(offset_, out, n);
    if (want_crc) crc = ZipCrc(crc, out, n);
    if (absl::Status status = WriteOut(out, n); !status.ok()) return status;
    offset_ += n;
    remaining -= n;
  }
  target_.pattern->Fill(offset_, buf, remaining);
  if (want_crc) crc = ZipCrc(crc, buf, remaining);
  pending_ = remaining;
  offset_ += remaining;
  return crc;
}

// --- VerifySink ------------------------------------------------------------

VerifySink::VerifySink(RankIo& io, int handle, std::string path, const DataPattern& pattern,
                       ScratchBuffer& buffer, size_t io_size, uint64_t expected_size,
                       ProgressSink* progress)
    : io_(io),
      handle_(handle),
      path_(std::move(path)),
      pattern_(pattern),
      buffer_(buffer),
      io_size_(std::min(io_size, buffer.size())),
      expected_size_(expected_size),
      progress_(progress) {}

absl::Status VerifySink::Fill() {
  if (used_ < have_) return absl::OkStatus();
  absl::StatusOr<size_t> n = io_.Read(handle_, buffer_.data(), io_size_);
  if (!n.ok()) return n.status();
  if (*n == 0) {
    return absl::DataLossError(absl::StrFormat("%s: file ends at offset %u, %u bytes expected",
                                               path_, offset_, expected_size_));
  }
  if (first_byte_ns_ == 0) first_byte_ns_ = MonotonicNs();
  if (progress_ != nullptr) progress_->OnBytes(*n);
  bytes_read_ += *n;
  have_ = *n;
  used_ = 0;
  return absl::OkStatus();
}

absl::Status VerifySink::Mismatch(uint64_t offset, uint8_t expected, uint8_t found,
                                  absl::string_view what) const {
  std::string message = absl::StrFormat("%s: byte at offset %u is 0x%02x, expected 0x%02x (%s)",
                                        path_, offset, found, expected, what);
  // Name what landed there when the start of its page is at hand.
  const uint64_t page_start = offset / DataPattern::kPageBytes * DataPattern::kPageBytes;
  const uint64_t buffer_start = offset_ - used_;
  if (page_start >= buffer_start &&
      page_start + DataPattern::kStampBytes <= offset_ - used_ + have_) {
    const std::string foreign =
        DataPattern::DescribeForeignPage(buffer_.data() + (page_start - buffer_start));
    if (!foreign.empty()) absl::StrAppend(&message, "; ", foreign);
  }
  return absl::DataLossError(message);
}

absl::Status VerifySink::Literal(absl::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    if (absl::Status status = Fill(); !status.ok()) return status;
    const size_t n = std::min(bytes.size() - done, have_ - used_);
    const uint8_t* got = buffer_.data() + used_;
    const auto* want = reinterpret_cast<const uint8_t*>(bytes.data() + done);
    if (std::memcmp(got, want, n) != 0) {
      size_t i = 0;
      while (got[i] == want[i]) ++i;
      return Mismatch(offset_ + i, want[i], got[i], "container bytes");
    }
    used_ += n;
    offset_ += n;
    done += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> VerifySink::Payload(uint64_t size, bool want_crc) {
  uint32_t crc = 0;
  uint64_t done = 0;
  while (done < size) {
    if (absl::Status status = Fill(); !status.ok()) return status;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size - done, have_ - used_));
    const uint8_t* got = buffer_.data() + used_;
    if (std::optional<size_t> bad = pattern_.FirstMismatch(offset_, got, n); bad.has_value()) {
      return Mismatch(offset_ + *bad, pattern_.ExpectedByte(offset_ + *bad), got[*bad], "payload");
    }
    if (want_crc) crc = ZipCrc(crc, got, n);
    used_ += n;
    offset_ += n;
    done += n;
  }
  return crc;
}

absl::Status VerifySink::Finish() {
  if (used_ == have_) {
    absl::StatusOr<size_t> n = io_.Read(handle_, buffer_.data(), std::min<size_t>(io_size_, 4096));
    if (!n.ok()) return n.status();
    have_ = *n;
    used_ = 0;
    bytes_read_ += *n;
  }
  if (used_ < have_) {
    return absl::DataLossError(
        absl::StrFormat("%s: file is longer than the %u bytes expected", path_, expected_size_));
  }
  return absl::OkStatus();
}

}  // namespace ckptfs::bench
