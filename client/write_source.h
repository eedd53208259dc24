// WriteSource: where the bytes of one write come from. A File copies them
// straight into its chunk buffer, once: from the caller's memory
// (MemorySource), or — in the FUSE daemon with splice — from the pipe the
// kernel filled, so that payload never takes a detour through another
// buffer.
//
// Thread-safety: a source is used by one write at a time.
#ifndef CKPTFS_CLIENT_WRITE_SOURCE_H_
#define CKPTFS_CLIENT_WRITE_SOURCE_H_

#include <cstddef>
#include <cstring>

#include "absl/status/status.h"

namespace ckptfs::client {

class WriteSource {
 public:
  virtual ~WriteSource() = default;
  // Fills dst[0, n) with the next n bytes of the write. An error (the
  // source ended early, a pipe read failed) leaves dst's content undefined
  // and fails the write.
  virtual absl::Status CopyTo(char* dst, size_t n) = 0;
};

// The bytes of a caller's buffer, in order. REQUIRES: `data` holds as many
// bytes as the write asks for and outlives the source.
class MemorySource final : public WriteSource {
 public:
  explicit MemorySource(const void* data) : next_(static_cast<const char*>(data)) {}
  absl::Status CopyTo(char* dst, size_t n) override {
    std::memcpy(dst, next_, n);
    next_ += n;
    return absl::OkStatus();
  }

 private:
  const char* next_;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_WRITE_SOURCE_H_
