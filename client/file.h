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
// Thread-safety: all methods may be called concurrently from any thread.
#ifndef CKPTFS_CLIENT_FILE_H_
#define CKPTFS_CLIENT_FILE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

class OpenFileState;  // shared by every handle of one inode in one Client

class File {
 public:
  File(std::shared_ptr<OpenFileState> state, int flags);
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  // Closes if not yet closed; an error then is logged (call Close to see it).
  ~File();

  uint64_t ino() const;
  // The file's size as this client knows it, including unflushed writes.
  uint64_t size() const;
  int flags() const { return flags_; }

  // Writes all of data[0, len) at `offset` (for an O_APPEND handle: at the
  // current end of file, whatever `offset` says). Returns len, or the first
  // error of this file. EBADF on a read-only handle.
  absl::StatusOr<size_t> Write(uint64_t offset, const void* data, size_t len);

  // Reads up to `len` bytes at `offset`; short only at end of file. Holes
  // (never written) read as zeros. Sees this client's own unflushed writes.
  absl::StatusOr<size_t> Read(uint64_t offset, void* buf, size_t len);

  // Waits for every buffered chunk of the file to be acknowledged and
  // commits the size in the metadata service (close-to-open).
  absl::Status Flush();

  // Flush, then makes the chunks durable on every storage server holding
  // them (fdatasync there).
  absl::Status Fsync();

  // Flush (unless opened read-only) and release this handle. Idempotent;
  // later calls return the first result.
  absl::Status Close();

 private:
  // Whether a read at `offset` continues this handle's sequential stream
  // (then the file reads ahead); remembers where this read ends.
  bool NoteRead(uint64_t offset, size_t len);

  // Kept until destruction so ino() and size() work after Close.
  const std::shared_ptr<OpenFileState> state_;
  const int flags_;
  std::atomic<bool> closed_{false};
  // Where the next sequential read of this handle would start.
  std::atomic<uint64_t> next_read_offset_{0};
  absl::Mutex close_mu_;
  bool close_done_ ABSL_GUARDED_BY(close_mu_) = false;
  absl::Status close_status_ ABSL_GUARDED_BY(close_mu_);
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_FILE_H_
