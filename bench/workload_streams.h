// Byte streams the container workloads (torch, dcp) are written through.
//
// A container format is emitted once, as a sequence of Literal (container
// bytes: zip headers, pickles, directories) and Payload (tensor bytes from
// the rank's DataPattern at the current offset) calls on a ByteSink. The
// sinks decide what that means:
//
//   CountingSink       only counts (sizes and offsets before any I/O);
//   CxxFilebufSink     writes through RankIo as libstdc++'s std::ofstream
//                      does for torch.save(obj, path): small pieces gather
//                      in an 8 KiB buffer; a piece of 1 KiB or more goes out
//                      in one writev together with what is buffered (here:
//                      one Write of both);
//   PyBufferedSink     writes as Python's io.BufferedWriter does for DCP
//                      (an 8 KiB buffer; a piece that does not fit flushes
//                      the buffer and, if over 8 KiB, is written directly);
//   VerifySink         reads the file back (io_size reads) and compares
//                      every byte; DataLoss names the file and offset.
//
// Every sink also splits a Write as the kernel does (at most kMaxRwCount
// bytes per call) and, when max_write_bytes is set, at that size, so
// memory stays bounded for huge storages.
//
// Thread-safety: a sink is used by one thread.
#ifndef CKPTFS_BENCH_WORKLOAD_STREAMS_H_
#define CKPTFS_BENCH_WORKLOAD_STREAMS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/data_pattern.h"
#include "bench/rank_io.h"
#include "bench/workload.h"
#include "bench/workload_buffers.h"

namespace ckptfs::bench {

// Linux's MAX_RW_COUNT: the most one read/write/writev moves.
inline constexpr uint64_t kMaxRwCount = 0x7ffff000;

// CLOCK_MONOTONIC now, in ns.
int64_t MonotonicNs();

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Container bytes.
  virtual absl::Status Literal(absl::string_view bytes) = 0;
  // `size` payload bytes at the current offset; returns their zip CRC-32
  // (0 when `want_crc` is false).
  virtual absl::StatusOr<uint32_t> Payload(uint64_t size, bool want_crc) = 0;
  // The runtime's stream flush (Python's flush() after each torch.save).
  virtual absl::Status Flush() = 0;
  // Bytes emitted so far: the file offset of the next byte.
  virtual uint64_t offset() const = 0;
};

class CountingSink : public ByteSink {
 public:
  absl::Status Literal(absl::string_view bytes) override;
  absl::StatusOr<uint32_t> Payload(uint64_t size, bool want_crc) override;
  absl::Status Flush() override { return absl::OkStatus(); }
  uint64_t offset() const override { return offset_; }

 private:
  uint64_t offset_ = 0;
};

// What the writing sinks share: the target, the pattern, the bytes moved.
struct WriteTarget {
  RankIo* io = nullptr;
  int handle = -1;
  std::string path;  // for messages
  const DataPattern* pattern = nullptr;
  ProgressSink* progress = nullptr;  // may be null
  // Largest single Write (0: only the kernel's limit).
  uint64_t max_write_bytes = 0;
};

// The payload memory a writing sink needs for storages of up to
// `largest_payload` bytes.
size_t WriteBufferBytes(uint64_t largest_payload, uint64_t max_write_bytes);

class CxxFilebufSink : public ByteSink {
 public:
  // `buffer` must hold WriteBufferBytes(largest payload, max_write_bytes).
  CxxFilebufSink(WriteTarget target, ScratchBuffer& buffer);
  absl::Status Literal(absl::string_view bytes) override;
  absl::StatusOr<uint32_t> Payload(uint64_t size, bool want_crc) override;
  absl::Status Flush() override { return absl::OkStatus(); }
  uint64_t offset() const override { return offset_; }
  // What close() of the ofstream writes: the buffered bytes.
  absl::Status Close();

 private:
  static constexpr size_t kBufferBytes = 8191;  // BUFSIZ - 1
  absl::Status WriteOut(const uint8_t* data, size_t size);

  WriteTarget target_;
  ScratchBuffer& buffer_;
  size_t pending_ = 0;  // buffered bytes at buffer_.data()
  uint64_t offset_ = 0;
};

class PyBufferedSink : public ByteSink {
 public:
  PyBufferedSink(WriteTarget target, ScratchBuffer& buffer);
  absl::Status Literal(absl::string_view bytes) override;
  absl::StatusOr<uint32_t> Payload(uint64_t size, bool want_crc) override;
  absl::Status Flush() override;
  uint64_t offset() const override { return offset_; }

 private:
  static constexpr size_t kBufferBytes = 8192;  // io.DEFAULT_BUFFER_SIZE
  absl::Status WriteOut(const uint8_t* data, size_t size);

  WriteTarget target_;
  ScratchBuffer& buffer_;
  size_t pending_ = 0;
  uint64_t offset_ = 0;
};

class VerifySink : public ByteSink {
 public:
  // Reads `path` (open as `handle`) in `io_size` pieces into `buffer`
  // (at least io_size bytes). `expected_size` is for messages.
  VerifySink(RankIo& io, int handle, std::string path, const DataPattern& pattern,
             ScratchBuffer& buffer, size_t io_size, uint64_t expected_size, ProgressSink* progress);
  absl::Status Literal(absl::string_view bytes) override;
  absl::StatusOr<uint32_t> Payload(uint64_t size, bool want_crc) override;
  absl::Status Flush() override { return absl::OkStatus(); }
  uint64_t offset() const override { return offset_; }
  // Checks that the file ends here (DataLoss if it is longer).
  absl::Status Finish();

  // CLOCK_MONOTONIC when the first byte arrived (0: none yet).
  int64_t first_byte_ns() const { return first_byte_ns_; }
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  // Makes at least one unread byte available, or DataLoss at end of file.
  absl::Status Fill();
  absl::Status Mismatch(uint64_t offset, uint8_t expected, uint8_t found,
                        absl::string_view what) const;

  RankIo& io_;
  const int handle_;
  const std::string path_;
  const DataPattern& pattern_;
  ScratchBuffer& buffer_;
  const size_t io_size_;
  const uint64_t expected_size_;
  ProgressSink* const progress_;
  size_t have_ = 0;      // bytes in buffer_
  size_t used_ = 0;      // of which consumed
  uint64_t offset_ = 0;  // file offset of buffer_[used_]
  uint64_t bytes_read_ = 0;
  int64_t first_byte_ns_ = 0;
};

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_WORKLOAD_STREAMS_H_
