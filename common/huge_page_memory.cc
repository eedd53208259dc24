// See huge_page_memory.h. The mapping is one huge page larger than asked so
// that a 2 MiB-aligned start always fits inside it.
#include "common/huge_page_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace ckptfs {

absl::StatusOr<HugePageMemory> HugePageMemory::Map(size_t bytes) {
  constexpr size_t kPage = 4096;
  if (bytes > SIZE_MAX - kHugePageSize - kPage) {
    return ErrnoStatus(ENOMEM, absl::StrCat("mapping ", bytes, " bytes of buffer memory"));
  }
  const size_t size = (bytes + kPage - 1) / kPage * kPage;
  const size_t mapped = size + kHugePageSize;
  void* mapping =
      ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) {
    return ErrnoStatus(errno, absl::StrCat("mapping ", size, " bytes of buffer memory"));
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapping);
  char* const data =
      reinterpret_cast<char*>((start + kHugePageSize - 1) / kHugePageSize * kHugePageSize);
  ::madvise(data, size, MADV_HUGEPAGE);  // a hint; without THP it is refused, fine
  return HugePageMemory(mapping, mapped, data, size);
}

HugePageMemory::HugePageMemory(HugePageMemory&& other) noexcept
    : mapping_(std::exchange(other.mapping_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

HugePageMemory& HugePageMemory::operator=(HugePageMemory&& other) noexcept {
  if (this != &other) {
    Unmap();
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

HugePageMemory::~HugePageMemory() { Unmap(); }

void HugePageMemory::Unmap() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_);
  mapping_ = nullptr;
  mapped_ = 0;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ckptfs
