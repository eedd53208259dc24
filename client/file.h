// File: an open regular file of a ckptfs Client.
//
// Writes land in per-file chunk buffers and are sent to the storage servers
// asynchronously, several chunks in flight at once, consecutive chunks to
// different servers. A write that fails at a storage server makes the file
// "failed": the error is returned by the next Write, Flush, Fsync or Close
// of any handle of that file, never only logged.
//
// Close-to-open: Flush() returns only when every chunk written so far is
// acknowledged and the file's size is committed in the metadata service, so
// any client that opens the file afterwards sees all of it. The FUSE daemon
// calls Flush on every close(2) (FUSE_FLUSH) and Close on release.
//
// Writer registration (checkpoints): a handle that may write has a random
// nonzero writer id, registered with the service when the file was created
// or opened. Flush releases it in the same CommitWrite that publishes the
// size (marking the file failed if a write of it failed), so a checkpoint
// committed after close(2) returns never finds the file open. A Write after
// that registers the handle again first; Close releases a handle still
// registered.
//
// Reader holds (checkpoints): a read-only handle of a file inside a
// checkpoint holds it at the service (client/reader_hold.h), so that the
// checkpoint's removal while the handle is open keeps the chunks it reads;
// Close releases the hold.
//
// Reads: View returns the bytes where they lie (a ReadView), so that the
// FUSE daemon hands the read cache's buffers to the kernel without copying
// them; Read copies a view into the caller's buffer.
//
// Thread-safety: all methods may be called concurrently from any thread.
#ifndef CKPTFS_CLIENT_FILE_H_
#define CKPTFS_CLIENT_FILE_H_

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/read_cache.h"
#include "client/reader_hold.h"
#include "client/write_source.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

class OpenFileState;  // shared by every handle of one inode in one Client

// ReadView: the bytes of one read, left where they lie — in chunk buffers
// of the file's read cache, pinned so that nothing reuses them while the
// view lives, or in buffers the view owns (bytes fetched straight from a
// server, when the read did not go through the cache). Move-only. The
// destructor unpins (taking the file's mutex briefly) and gives owned
// buffers back to the Client's BufferPool.
//
// Thread-safety: a view is used by one thread at a time; views of one file
// may be read and destroyed concurrently from any threads.
class ReadView {
 public:
  ReadView() = default;  // empty
  ReadView(ReadView&& other) noexcept;
  ReadView& operator=(ReadView&& other) noexcept;
  ReadView(const ReadView&) = delete;
  ReadView& operator=(const ReadView&) = delete;
  ~ReadView();

  // Bytes in all spans.
  size_t size() const { return size_; }
  // The bytes in order, one span per chunk the read touched. They stay
  // unchanged until the view is destroyed or moved from.
  absl::Span<const struct iovec> spans() const { return spans_; }
  // Copies all size() bytes to `out`.
  void CopyTo(void* out) const;

 private:
  friend class OpenFileState;
  explicit ReadView(std::shared_ptr<OpenFileState> state) : state_(std::move(state)) {}
  // Unpins and returns the owned buffers; leaves the view empty.
  void Release();

  std::shared_ptr<OpenFileState> state_;  // null when empty
  absl::InlinedVector<struct iovec, 2> spans_;
  absl::InlinedVector<ReadCache::PinRef, 2> pins_;
  // Chunk-size buffers from the BufferPool.
  absl::InlinedVector<ChunkBuffer, 1> owned_;
  size_t size_ = 0;
};

// What the metadata service said of a file when a handle was opened. Every
// change of its content (a commit of writes, a truncate) changes ctime_ns,
// which the service sets from its own clock; equal versions mean equal
// content as far as committed writes go.
struct FileVersion {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;

  static FileVersion Of(const meta::Attr& attr) {
    return {attr.size(), attr.mtime_ns(), attr.ctime_ns()};
  }
  friend bool operator==(const FileVersion& a, const FileVersion& b) {
    return a.size == b.size && a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns;
  }
  friend bool operator!=(const FileVersion& a, const FileVersion& b) { return !(a == b); }
};

class File {
 public:
  // `writer_handle`: the id this handle was registered under as a writer
  // (0 for a read-only handle, which never registers). `opened`: the
  // service's attributes at this open. `hold`: what a read-only open of a
  // checkpoint file holds (released by Close).
  File(std::shared_ptr<OpenFileState> state, int flags, uint64_t writer_handle,
       const meta::Attr& opened, ReaderHold hold = ReaderHold());
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  // Closes if not yet closed; an error then is logged (call Close to see it).
  ~File();

  uint64_t ino() const;
  // The file's size as this client knows it, including unflushed writes.
  uint64_t size() const;
  int flags() const { return flags_; }
  uint64_t writer_handle() const { return writer_handle_; }
  // The file's version as the service told it at this open (fresh: the
  // open asked the service).
  const FileVersion& opened_version() const { return opened_; }
  // The file's st_mode (type and permission bits) at this open.
  uint32_t opened_mode() const { return opened_mode_; }

  // Writes all of data[0, len) at `offset` (for an O_APPEND handle: at the
  // current end of file, whatever `offset` says). Returns len, or the first
  // error of this file. EBADF on a read-only handle. Registers the handle
  // as a writer again if a Flush released it (EROFS: the file has become
  // part of a committed checkpoint meanwhile).
  absl::StatusOr<size_t> Write(uint64_t offset, const void* data, size_t len);
  // Write, with the `len` bytes taken from `source` (e.g. a pipe, so that
  // they are copied once, straight into the chunk buffer). A source error
  // fails the write; the bytes before it are written.
  absl::StatusOr<size_t> WriteFrom(uint64_t offset, WriteSource& source, size_t len);

  // Reads up to `len` bytes at `offset`; short only at end of file. Holes
  // (never written) read as zeros. Sees this client's own unflushed writes.
  absl::StatusOr<size_t> Read(uint64_t offset, void* buf, size_t len);
  // Read without the copy: the same bytes, left where they lie (see
  // ReadView). Short only at end of file (an empty view there).
  absl::StatusOr<ReadView> View(uint64_t offset, size_t len);

  // Waits for every buffered chunk of the file to be acknowledged and
  // commits the size in the metadata service (close-to-open), releasing
  // this handle's writer registration in the same call.
  absl::Status Flush();

  // Flush, then makes the chunks durable on every storage server holding
  // them (fdatasync there).
  absl::Status Fsync();

  // Flush (unless opened read-only; releasing the writer registration if
  // still held), release the reader hold if any, and release this handle.
  // Idempotent; later calls return the first result.
  absl::Status Close();

 private:
  // Whether a read at `offset` continues this handle's sequential stream
  // (then the file reads ahead); remembers where this read ends.
  bool NoteRead(uint64_t offset, size_t len);
  // Flush of a handle that may write: with the writer release if held.
  absl::Status FlushWriter() ABSL_LOCKS_EXCLUDED(writer_mu_);

  // Kept until destruction so ino() and size() work after Close.
  const std::shared_ptr<OpenFileState> state_;
  const int flags_;
  const uint64_t writer_handle_;
  const FileVersion opened_;
  const uint32_t opened_mode_;
  std::atomic<bool> closed_{false};
  // Writes hold it shared; a flush (which releases the registration) holds
  // it exclusively, so no write slips in between its drain and its release.
  // Lock order: close_mu_, then writer_mu_, then the state's.
  absl::Mutex writer_mu_;
  bool registered_ ABSL_GUARDED_BY(writer_mu_);
  // Where the next sequential read of this handle would start.
  std::atomic<uint64_t> next_read_offset_{0};
  absl::Mutex close_mu_;
  bool close_done_ ABSL_GUARDED_BY(close_mu_) = false;
  ReaderHold hold_ ABSL_GUARDED_BY(close_mu_);
  absl::Status close_status_ ABSL_GUARDED_BY(close_mu_);
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_FILE_H_
