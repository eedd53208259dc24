// How a failed chunk request reads to the application. A storage server's
// own errno (ENOSPC, EDQUOT, EFBIG, EINVAL ...) passes through; a transport
// failure (refused, reset, timed out, garbled in transit, server busy) is
// EIO, the errno POSIX programs expect from a failed read, write or fsync,
// with the real cause kept in the message. The message ends with what to do
// (e.g. "check `ckptfs status`" when a server is unreachable), since it is
// what a user sees in a mount's log or a libckptfs caller's exception.
// Builds a string only on failure: nothing here is on a success path.
// Thread-safe (pure function).
#ifndef CKPTFS_CLIENT_IO_ERRORS_H_
#define CKPTFS_CLIENT_IO_ERRORS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ckptfs::client {

// `status` (not OK) as a file I/O error prefixed with `context`, e.g.
// "write of chunk 3 of inode 42: storage server 127.0.0.1:7002: connect:
// Connection refused (storage server unreachable: check `ckptfs status`)".
absl::Status FileIoError(const absl::Status& status, absl::string_view context);

// `status` (not OK) with `context` in front ("context: message"), its code
// and errno kept (EIO when it had none): for a chunk request's failure
// named by the copy or fragment that failed.
absl::Status AnnotateError(const absl::Status& status, absl::string_view context);

// True at most once a minute per storage server id: a warning about a down
// or damaged server would otherwise add a log line to every chunk read of
// it. Process-wide, thread-safe (one mutex).
bool ShouldWarnAboutServer(uint32_t server_id);

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_IO_ERRORS_H_
