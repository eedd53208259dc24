// RecvOneByte: how a test waits for the peer to close its raw socket.
//
// Tests that speak to an in-process server over a raw socket end by
// checking that the server hung up: one recv that returns 0. With a receive
// timeout set (SetSocketTimeouts) the kernel does not restart that recv
// after an interruption, and on Linux 6.18 a thread of a process that also
// runs io_uring event loops sees EINTR within milliseconds of a connect,
// without any signal handler running. This retries those.
#ifndef CKPTFS_TESTS_COMMON_RECV_EOF_H_
#define CKPTFS_TESTS_COMMON_RECV_EOF_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>

namespace ckptfs {

// recv of one byte on `fd`, retried on EINTR: 0 when the peer closed the
// connection, 1 when a byte came, -1 (errno set) on an error or timeout.
inline ssize_t RecvOneByte(int fd) {
  char byte;
  ssize_t got;
  do {
    got = ::recv(fd, &byte, 1, 0);
  } while (got < 0 && errno == EINTR);
  return got;
}

}  // namespace ckptfs

#endif  // CKPTFS_TESTS_COMMON_RECV_EOF_H_
