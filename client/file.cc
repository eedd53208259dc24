// See file.h. A File is a thin handle over the OpenFileState of its inode:
// it checks the access mode, tracks its own sequential-read stream and
// counts itself in the state's handles.
#include "client/file.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "client/open_file_state.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::client {
namespace {

// Reads starting this close to where the last one ended still count as
// sequential: the kernel issues its read-ahead requests (a window of a few
// MiB) concurrently, so they arrive slightly out of order.
constexpr uint64_t kSequentialSlack = 8 << 20;

}  // namespace

ReadView::ReadView(ReadView&& other) noexcept
    : state_(std::move(other.state_)),
      spans_(std::move(other.spans_)),
      pins_(std::move(other.pins_)),
      owned_(std::move(other.owned_)),
      size_(other.size_) {
  // A moved-from InlinedVector keeps its (moved-from) elements.
  other.spans_.clear();
  other.pins_.clear();
  other.owned_.clear();
  other.size_ = 0;
}

ReadView& ReadView::operator=(ReadView&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    spans_ = std::move(other.spans_);
    pins_ = std::move(other.pins_);
    owned_ = std::move(other.owned_);
    size_ = other.size_;
    other.spans_.clear();
    other.pins_.clear();
    other.owned_.clear();
    other.size_ = 0;
  }
  return *this;
}

ReadView::~ReadView() { Release(); }

void ReadView::Release() {
  if (state_ != nullptr) {
    // Keep the state alive through EndView even if this view held the last
    // reference to it.
    std::shared_ptr<OpenFileState> state = std::move(state_);
    state->EndView(*this);
  }
  spans_.clear();
  pins_.clear();
  owned_.clear();
  size_ = 0;
}

void ReadView::CopyTo(void* out) const {
  char* at = static_cast<char*>(out);
  for (const struct iovec& span : spans_) {
    // File::Read has bytes fetched straight from a server put in place.
    if (span.iov_base != at) std::memcpy(at, span.iov_base, span.iov_len);
    at += span.iov_len;
  }
}

File::File(std::shared_ptr<OpenFileState> state, int flags, uint64_t writer_handle,
           const meta::Attr& opened, ReaderHold hold)
    : state_(std::move(state)),
      flags_(flags),
      writer_handle_(writer_handle),
      opened_(FileVersion::Of(opened)),
      opened_mode_(opened.mode()),
      registered_(writer_handle != 0),
      hold_(std::move(hold)) {
  state_->AddHandle();
}

File::~File() {
  absl::Status status = Close();
  if (!status.ok()) {
    CKPTFS_LOG(kWarning) << "closing inode " << ino() << " on destruction: " << status.message();
  }
}

uint64_t File::ino() const { return state_->ino(); }

uint64_t File::size() const { return state_->size(); }

absl::StatusOr<size_t> File::Write(uint64_t offset, const void* data, size_t len) {
  MemorySource source(data);
  return WriteFrom(offset, source, len);
}

absl::StatusOr<size_t> File::WriteFrom(uint64_t offset, WriteSource& source, size_t len) {
  if (closed_.load()) return ErrnoStatus(EBADF, "write on a closed file");
  if ((flags_ & O_ACCMODE) == O_RDONLY || writer_handle_ == 0) {
    return ErrnoStatus(EBADF, "write on a file opened read-only");
  }
  writer_mu_.ReaderLock();
  while (!registered_) {
    // Released by a flush (close of a dup'd descriptor): register again
    // before buffering anything.
    writer_mu_.ReaderUnlock();
    {
      absl::MutexLock lock(&writer_mu_);
      if (!registered_) {
        if (absl::Status status = state_->RegisterWriter(writer_handle_); !status.ok()) {
          return status;
        }
        registered_ = true;
      }
    }
    writer_mu_.ReaderLock();
  }
  absl::StatusOr<size_t> written = state_->Write(offset, source, len, (flags_ & O_APPEND) != 0);
  writer_mu_.ReaderUnlock();
  return written;
}

bool File::NoteRead(uint64_t offset, size_t len) {
  const uint64_t expected = next_read_offset_.exchange(offset + len);
  const uint64_t distance = offset > expected ? offset - expected : expected - offset;
  return distance <= kSequentialSlack;
}

absl::StatusOr<size_t> File::Read(uint64_t offset, void* buf, size_t len) {
  if (closed_.load()) return ErrnoStatus(EBADF, "read on a closed file");
  // Reads through a write-only handle are allowed: the kernel's page cache
  // reads through whatever handle it has.
  return state_->Read(offset, buf, len, NoteRead(offset, len));
}

absl::StatusOr<ReadView> File::View(uint64_t offset, size_t len) {
  if (closed_.load()) return ErrnoStatus(EBADF, "read on a closed file");
  return state_->View(offset, len, NoteRead(offset, len));
}

absl::Status File::Flush() {
  if (closed_.load()) return ErrnoStatus(EBADF, "flush of a closed file");
  if (writer_handle_ == 0) return state_->Flush();
  return FlushWriter();
}

absl::Status File::FlushWriter() {
  absl::MutexLock lock(&writer_mu_);
  if (!registered_) return state_->Flush();
  OpenFileState::FlushRelease flushed = state_->FlushAndReleaseWriter(writer_handle_);
  if (flushed.released) registered_ = false;
  return flushed.status;
}

absl::Status File::Fsync() {
  if (closed_.load()) return ErrnoStatus(EBADF, "fsync of a closed file");
  return state_->Fsync();
}

absl::Status File::Close() {
  absl::MutexLock lock(&close_mu_);
  if (close_done_) return close_status_;
  // A reader has nothing to publish: its close must not wait for the chunks
  // some writer of the same inode has in flight.
  if ((flags_ & O_ACCMODE) != O_RDONLY) {
    close_status_ = writer_handle_ != 0 ? FlushWriter() : state_->Flush();
  }
  closed_.store(true);
  close_done_ = true;
  state_->ReleaseHandle();
  // Last: the chunks may go once the hold does.
  hold_.Release();
  return close_status_;
}

}  // namespace ckptfs::client
