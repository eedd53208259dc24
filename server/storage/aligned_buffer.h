// AlignedBuffer: an owned, 4096-byte-aligned heap buffer for O_DIRECT I/O.
//
// Chunk data moves between sockets and disk through these buffers: the
// payload of a WRITE is received straight into one and written to disk from
// it, so it crosses user space once. Capacity is always a multiple of
// kAlignment, so a payload of any length can be padded to whole blocks in
// place. Buffers are meant to be allocated once and reused.
//
// A buffer either owns its heap memory or borrows memory it never frees
// (Borrow: a slice of the server's PayloadArena region, owned by a lease).
// Growing a borrowed buffer (Reserve past its capacity) switches it to
// fresh owned heap memory; the borrowed slice is left to its owner.
//
// Thread-safety: none; one owner at a time. Move-only.
#ifndef CKPTFS_SERVER_STORAGE_ALIGNED_BUFFER_H_
#define CKPTFS_SERVER_STORAGE_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ckptfs::storage {

// The block size of chunk files: buffer alignment, and the granularity of
// every O_DIRECT transfer.
inline constexpr size_t kBlockSize = 4096;

inline constexpr size_t RoundUpToBlock(size_t n) {
  return (n + kBlockSize - 1) / kBlockSize * kBlockSize;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        capacity_(std::exchange(other.capacity_, 0)),
        size_(std::exchange(other.size_, 0)),
        owned_(std::exchange(other.owned_, true)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      FreeOwned();
      data_ = std::exchange(other.data_, nullptr);
      capacity_ = std::exchange(other.capacity_, 0);
      size_ = std::exchange(other.size_, 0);
      owned_ = std::exchange(other.owned_, true);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { FreeOwned(); }

  // A buffer over `capacity` bytes at `data` that it does not own (never
  // frees). REQUIRES: `data` is kBlockSize-aligned, `capacity` a multiple of
  // kBlockSize, and the memory outlives every use of the buffer.
  static AlignedBuffer Borrow(char* data, size_t capacity) {
    AlignedBuffer buffer;
    buffer.data_ = data;
    buffer.capacity_ = capacity;
    buffer.owned_ = false;
    return buffer;
  }
  bool borrowed() const { return !owned_ && data_ != nullptr; }

  // Makes capacity() >= RoundUpToBlock(n). Contents are NOT preserved when
  // the buffer grows (a borrowed one then owns new heap memory); size()
  // becomes 0 then. ENOMEM when memory is short.
  absl::Status Reserve(size_t n);

  // Frees the memory when the buffer holds more than `max_keep` bytes, so a
  // long-lived thread does not pin the largest buffer it ever needed.
  void ShrinkTo(size_t max_keep);

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t capacity() const { return capacity_; }

  // The meaningful prefix, set by whoever filled the buffer.
  size_t size() const { return size_; }
  // REQUIRES: n <= capacity().
  void set_size(size_t n) { size_ = n; }
  absl::string_view view() const { return absl::string_view(data_, size_); }

 private:
  void FreeOwned() {
    if (owned_) std::free(data_);
  }

  char* data_ = nullptr;
  size_t capacity_ = 0;
  size_t size_ = 0;
  bool owned_ = true;  // data_ is ours to free (when not null)
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_ALIGNED_BUFFER_H_
