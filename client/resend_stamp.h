// ResendStamp: marks each attempt of a WRITE or TRIM so that a storage
// server never applies an earlier attempt after a later one
// (server/storage/resend_fence.h).
//
// A transport sends a request again when its connection failed, and cannot
// know whether the server had already taken the earlier attempt into its
// queue. Each attempt gets this transport's random client id and a write id
// of its own, and names the ids of the attempts before it (supersedes): the
// server then drops an earlier attempt that reaches its disk after the
// resend. Other requests (READ, SYNC, ...) are safe to repeat and are left
// unmarked.
//
// Thread-safety: thread-safe.
#ifndef CKPTFS_CLIENT_RESEND_STAMP_H_
#define CKPTFS_CLIENT_RESEND_STAMP_H_

#include <atomic>
#include <cstdint>

#include "proto/data.pb.h"

namespace ckptfs::client {

class ResendStamp {
 public:
  ResendStamp();  // a random nonzero client id
  ResendStamp(const ResendStamp&) = delete;
  ResendStamp& operator=(const ResendStamp&) = delete;

  // Before each attempt at sending `request`: a WRITE or TRIM gets the
  // client id and a new write id, and an attempt after the first also
  // supersedes the ids of those before it. Other ops are left as they are.
  void Stamp(data::RequestHeader& request);

  uint64_t client_id() const { return client_id_; }

 private:
  const uint64_t client_id_;
  std::atomic<uint64_t> next_write_id_{1};
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_RESEND_STAMP_H_
