// See aligned_buffer.h.
#include "server/storage/aligned_buffer.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace ckptfs::storage {

absl::Status AlignedBuffer::Reserve(size_t n) {
  const size_t want = RoundUpToBlock(n);
  if (want <= capacity_) return absl::OkStatus();
  FreeOwned();
  data_ = nullptr;
  owned_ = true;
  capacity_ = 0;
  size_ = 0;
  void* memory = nullptr;
  if (::posix_memalign(&memory, kBlockSize, want) != 0) {
    return ErrnoStatus(ENOMEM, absl::StrCat("cannot allocate a ", want, "-byte I/O buffer"));
  }
  data_ = static_cast<char*>(memory);
  capacity_ = want;
  return absl::OkStatus();
}

void AlignedBuffer::ShrinkTo(size_t max_keep) {
  if (capacity_ <= max_keep) return;
  FreeOwned();
  data_ = nullptr;
  owned_ = true;
  capacity_ = 0;
  size_ = 0;
}

}  // namespace ckptfs::storage
