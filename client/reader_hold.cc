// See reader_hold.h.
#include "client/reader_hold.h"

#include <utility>

#include "common/log.h"

namespace ckptfs::client {

ReaderHold& ReaderHold::operator=(ReaderHold&& other) noexcept {
  if (this != &other) {
    Release();
    meta_ = std::exchange(other.meta_, nullptr);
    ino_ = other.ino_;
    handle_ = other.handle_;
  }
  return *this;
}

void ReaderHold::Release() {
  if (meta_ == nullptr) return;
  meta::ReleaseReaderRequest request;
  request.set_ino(ino_);
  request.set_reader_handle(handle_);
  absl::StatusOr<meta::Empty> released = std::exchange(meta_, nullptr)->ReleaseReader(request);
  if (!released.ok()) {
    CKPTFS_LOG(kWarning) << "releasing the read hold of inode " << ino_ << ": " << released.status()
                         << " (the metadata service drops it after --orphan_grace_s)";
  }
}

}  // namespace ckptfs::client
