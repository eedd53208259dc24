// How a failed chunk request reads to the application. A storage server's
// own errno (ENOSPC, EDQUOT, EFBIG, EINVAL ...) passes through; a transport
// failure (refused, reset, timed out, garbled in transit, server busy) is
// EIO, the errno POSIX programs expect from a failed read, write or fsync,
// with the real cause kept in the message. Thread-safe (pure function).
#ifndef CKPTFS_CLIENT_IO_ERRORS_H_
#define CKPTFS_CLIENT_IO_ERRORS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ckptfs::client {

// `status` (not OK) as a file I/O error prefixed with `context`, e.g.
// "write of chunk 3 of inode 42".
absl::Status FileIoError(const absl::Status& status, absl::string_view context);

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_IO_ERRORS_H_
