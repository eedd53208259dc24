// HugePageMemory: an anonymous private mapping whose usable range starts on
// a 2 MiB boundary and is advised for transparent huge pages
// (MADV_HUGEPAGE, a hint the kernel may ignore).
//
// Why: an O_DIRECT read or write into memory of 4 KiB pages needs one
// block-layer segment per page, and a device that takes few segments per
// request (virtio-blk: 254) splits a 4 MiB chunk read into several requests.
// On huge pages the same read is one or two segments, and copies into and
// out of it walk fewer page-table entries. Used for the buffers that chunk
// files are read into with O_DIRECT.
//
// Thread-safety: none; one owner at a time. Move-only.
#ifndef CKPTFS_COMMON_HUGE_PAGE_MEMORY_H_
#define CKPTFS_COMMON_HUGE_PAGE_MEMORY_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace ckptfs {

inline constexpr size_t kHugePageSize = size_t{2} << 20;

class HugePageMemory {
 public:
  HugePageMemory() = default;  // empty: data() is null, size() 0
  // Maps at least `bytes` (> 0) bytes, zero-filled, starting on a 2 MiB
  // boundary; size() is `bytes` rounded up to 4 KiB. Nothing is touched
  // yet: pages are faulted in on first use. ENOMEM when the mapping fails.
  static absl::StatusOr<HugePageMemory> Map(size_t bytes);

  HugePageMemory(HugePageMemory&& other) noexcept;
  HugePageMemory& operator=(HugePageMemory&& other) noexcept;
  HugePageMemory(const HugePageMemory&) = delete;
  HugePageMemory& operator=(const HugePageMemory&) = delete;
  ~HugePageMemory();  // unmaps

  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  HugePageMemory(void* mapping, size_t mapped, char* data, size_t size)
      : mapping_(mapping), mapped_(mapped), data_(data), size_(size) {}
  void Unmap();

  void* mapping_ = nullptr;  // what mmap returned, for munmap
  size_t mapped_ = 0;
  char* data_ = nullptr;  // the 2 MiB-aligned start within it
  size_t size_ = 0;
};

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_HUGE_PAGE_MEMORY_H_
