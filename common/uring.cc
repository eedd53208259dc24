// See uring.h.
#include "common/uring.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs {

absl::StatusOr<std::unique_ptr<Ring>> Ring::Create(unsigned entries) {
  std::unique_ptr<Ring> ring(new Ring());
  const int rc = io_uring_queue_init(entries, &ring->ring_, 0);
  if (rc < 0) return SyscallError(-rc, "io_uring_queue_init");
  ring->entries_ = entries;
  return ring;
}

Ring::~Ring() {
  if (entries_ > 0) io_uring_queue_exit(&ring_);
}

absl::Status Ring::RegisterBuffers(const std::vector<iovec>& regions) {
  if (!fixed_.empty()) return ErrnoStatus(EBUSY, "ring already has registered buffers");
  const int rc =
      io_uring_register_buffers(&ring_, regions.data(), static_cast<unsigned>(regions.size()));
  if (rc < 0) return SyscallError(-rc, "io_uring_register_buffers");
  fixed_ = regions;
  return absl::OkStatus();
}

int Ring::FixedIndex(const void* buf, size_t len) const {
  const auto* p = static_cast<const char*>(buf);
  for (size_t i = 0; i < fixed_.size(); ++i) {
    const auto* base = static_cast<const char*>(fixed_[i].iov_base);
    if (p >= base && p + len <= base + fixed_[i].iov_len) return static_cast<int>(i);
  }
  return -1;
}

absl::Status Ring::Run(std::vector<Op>& ops) {
  // done[i]: bytes moved so far for op i (reads/writes resume after short I/O).
  std::vector<size_t> done(ops.size(), 0);
  std::vector<bool> finished(ops.size(), false);
  size_t next = 0;
  size_t in_flight = 0;
  std::vector<size_t> requeue;
  auto prep = [&](size_t i) -> bool {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return false;
    Op& op = ops[i];
    char* base = static_cast<char*>(op.buf) + done[i];
    // At most 1 GiB per submission; the rest follows as a short transfer.
    const unsigned len = static_cast<unsigned>(std::min<size_t>(op.len - done[i], size_t{1} << 30));
    const int fixed = op.kind == OpKind::kFdatasync ? -1 : FixedIndex(base, len);
    switch (op.kind) {
      case OpKind::kRead:
        if (fixed >= 0) {
          io_uring_prep_read_fixed(sqe, op.fd, base, len, op.offset + done[i], fixed);
        } else {
          io_uring_prep_read(sqe, op.fd, base, len, op.offset + done[i]);
        }
        break;
      case OpKind::kWrite:
        if (fixed >= 0) {
          io_uring_prep_write_fixed(sqe, op.fd, base, len, op.offset + done[i], fixed);
        } else {
          io_uring_prep_write(sqe, op.fd, base, len, op.offset + done[i]);
        }
        break;
      case OpKind::kFdatasync:
        io_uring_prep_fsync(sqe, op.fd, IORING_FSYNC_DATASYNC);
        break;
    }
    io_uring_sqe_set_data64(sqe, i);
    ++in_flight;
    return true;
  };
  while (next < ops.size() || !requeue.empty() || in_flight > 0) {
    while (!requeue.empty() && in_flight < entries_ && prep(requeue.back())) requeue.pop_back();
    while (next < ops.size() && in_flight < entries_ && prep(next)) ++next;
    const int submitted = io_uring_submit_and_wait(&ring_, 1);
    // EINTR, EAGAIN and EBUSY (completion queue backlog) are transient: reap
    // what completed and submit again.
    if (submitted < 0 && submitted != -EINTR && submitted != -EAGAIN && submitted != -EBUSY) {
      if (in_flight > 0) {
        // Ops in flight still point at the caller's buffers and their
        // completions would land in the next batch: returning is unsafe.
        CKPTFS_LOG(kError) << "io_uring_submit_and_wait failed with " << in_flight
                           << " ops in flight: " << std::strerror(-submitted);
        std::abort();
      }
      return SyscallError(-submitted, "io_uring_submit_and_wait");
    }
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      --in_flight;
      const size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      Op& op = ops[i];
      const int res = cqe->res;
      if (res == -EAGAIN || res == -EINTR) {
        requeue.push_back(i);
        continue;
      }
      if (res < 0) {
        op.result = res;
        finished[i] = true;
        continue;
      }
      if (op.kind == OpKind::kFdatasync) {
        op.result = 0;
        finished[i] = true;
        continue;
      }
      done[i] += static_cast<size_t>(res);
      if (done[i] < op.len && res > 0) {
        requeue.push_back(i);  // short transfer: continue with the rest
        continue;
      }
      if (done[i] < op.len && op.kind == OpKind::kWrite) {
        op.result = -EIO;  // a write that moved nothing cannot make progress
      } else {
        op.result = static_cast<int64_t>(done[i]);
      }
      finished[i] = true;
    }
    io_uring_cq_advance(&ring_, seen);
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> Ring::Pread(int fd, void* buf, size_t len, off_t offset) {
  std::vector<Op> ops{{OpKind::kRead, fd, buf, len, offset, 0}};
  if (absl::Status s = Run(ops); !s.ok()) return s;
  if (ops[0].result < 0) return SyscallError(static_cast<int>(-ops[0].result), "read");
  return static_cast<size_t>(ops[0].result);
}

absl::Status Ring::PwriteAll(int fd, const void* buf, size_t len, off_t offset) {
  std::vector<Op> ops{{OpKind::kWrite, fd, const_cast<void*>(buf), len, offset, 0}};
  if (absl::Status s = Run(ops); !s.ok()) return s;
  if (ops[0].result < 0) return SyscallError(static_cast<int>(-ops[0].result), "write");
  return absl::OkStatus();
}

absl::Status Ring::Fdatasync(int fd) {
  std::vector<Op> ops{{OpKind::kFdatasync, fd, nullptr, 0, 0, 0}};
  if (absl::Status s = Run(ops); !s.ok()) return s;
  if (ops[0].result < 0) return SyscallError(static_cast<int>(-ops[0].result), "fdatasync");
  return absl::OkStatus();
}

}  // namespace ckptfs
