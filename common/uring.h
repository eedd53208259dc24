// Ring: an owned io_uring instance (liburing) for disk I/O.
//
// One ring per thread: a Ring is not thread-safe and must be used only by
// the thread that owns it. Operations are submitted as a batch and reaped
// together; each Op records its own result, so a caller can queue several
// reads or writes (e.g. a chunk's header block and its data) and wait once.
// Short reads and writes are resubmitted for the remainder; -EAGAIN is
// retried. Memory registered with RegisterBuffers() is read and written with
// IORING_OP_READ_FIXED / WRITE_FIXED (no page pinning per operation); any
// other memory with plain READ / WRITE, so callers need not care which.
#ifndef CKPTFS_COMMON_URING_H_
#define CKPTFS_COMMON_URING_H_

#include <liburing.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ckptfs {

class Ring {
 public:
  enum class OpKind { kRead, kWrite, kFdatasync };

  // One operation of a batch. After Run(), `result` is the bytes moved (or 0
  // for fdatasync), or -errno.
  struct Op {
    OpKind kind = OpKind::kRead;
    int fd = -1;
    void* buf = nullptr;
    size_t len = 0;
    off_t offset = 0;
    int64_t result = 0;
  };

  // A ring with room for `entries` operations in flight.
  static absl::StatusOr<std::unique_ptr<Ring>> Create(unsigned entries);

  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring();

  // Submits every op and waits for all of them. A read that reaches end of
  // file stops there (result = bytes read). Returns OK when the batch ran;
  // each op's own failure is in its `result`.
  absl::Status Run(std::vector<Op>& ops);

  // Registers `regions` (each at most 1 GiB) for fixed-buffer I/O. The
  // memory must stay mapped for the ring's lifetime. A failure (e.g. ENOMEM
  // from RLIMIT_MEMLOCK without CAP_IPC_LOCK) leaves the ring usable
  // without fixed buffers; the caller decides whether to mind.
  absl::Status RegisterBuffers(const std::vector<iovec>& regions);

  // Single operations, for callers with one thing to do.
  absl::StatusOr<size_t> Pread(int fd, void* buf, size_t len, off_t offset);
  absl::Status PwriteAll(int fd, const void* buf, size_t len, off_t offset);
  absl::Status Fdatasync(int fd);

 private:
  Ring() = default;
  // The index of the registered region holding [buf, buf + len), or -1.
  int FixedIndex(const void* buf, size_t len) const;

  io_uring ring_{};
  unsigned entries_ = 0;
  std::vector<iovec> fixed_;  // registered regions, by buffer index
};

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_URING_H_
