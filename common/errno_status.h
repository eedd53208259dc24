// Conversions between POSIX errno values and absl::Status.
//
// Errors travel through ckptfs as absl::Status. Where the POSIX errno
// matters (everything that ends in a FUSE reply), the errno rides along as a
// status payload so that ENOTEMPTY and EISDIR, which share a canonical code,
// stay distinct. Turn -errno into a Status once, with context; turn it back
// into an errno only where FUSE replies. Thread-safe (pure functions).
#ifndef CKPTFS_COMMON_ERRNO_STATUS_H_
#define CKPTFS_COMMON_ERRNO_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ckptfs {

// A Status with the canonical code closest to `err` and `err` attached.
// REQUIRES: err > 0.
absl::Status ErrnoStatus(int err, absl::string_view context);

// Like ErrnoStatus but with an explicit canonical code (e.g. kUnavailable
// for a transport failure that should still read as EIO).
absl::Status ErrnoStatusWithCode(absl::StatusCode code, int err, absl::string_view context);

// ErrnoStatus(errno, context + ": " + strerror(errno)) for a failed syscall.
absl::Status SyscallError(int err, absl::string_view context);

// The errno a Status stands for: the attached one, else one derived from the
// canonical code (e.g. kNotFound -> ENOENT, kUnavailable -> EIO). 0 for OK.
int ErrnoFromStatus(const absl::Status& status);

// The canonical code ckptfs uses for `err`.
absl::StatusCode CodeForErrno(int err);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_ERRNO_STATUS_H_
