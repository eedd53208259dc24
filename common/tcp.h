// TCP helpers for the data path: address parsing, listening, connecting,
// and whole-buffer send/receive on blocking sockets. Thread-safe (no state).
#ifndef CKPTFS_COMMON_TCP_H_
#define CKPTFS_COMMON_TCP_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace ckptfs {

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const;
};

// Parses "host:port" (IPv4 or name; "[v6]:port" too). InvalidArgument with
// the offending text otherwise.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text);

// A listening TCP socket bound to `addr` (SO_REUSEADDR). A port in use fails
// with EADDRINUSE and a message naming the address.
absl::StatusOr<UniqueFd> ListenTcp(const HostPort& addr, int backlog = 512);

// The port a listening socket got (useful with port 0).
absl::StatusOr<uint16_t> LocalPort(int fd);

// A connected TCP socket with TCP_NODELAY, or an error naming `addr` after
// `timeout`.
absl::StatusOr<UniqueFd> ConnectTcp(const HostPort& addr, absl::Duration timeout);

// Sets SO_RCVTIMEO and SO_SNDTIMEO; a blocked call then fails with ETIMEDOUT.
absl::Status SetSocketTimeouts(int fd, absl::Duration timeout);

// Sends every byte of the iovecs (retrying short writes and EINTR).
// `iov` is modified. Fails with the errno of the socket.
absl::Status SendAll(int fd, struct iovec* iov, int iovcnt);
absl::Status SendAll(int fd, const void* data, size_t size);

// Receives exactly `size` bytes (retrying short reads and EINTR).
// A peer that closes before the first byte yields IsEndOfStream(status); one
// that closes midway yields ECONNRESET ("connection closed by peer").
absl::Status RecvAll(int fd, void* data, size_t size);

// True for the status RecvAll returns on a clean close at a boundary.
bool IsEndOfStream(const absl::Status& status);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_TCP_H_
