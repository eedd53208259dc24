// DataConnection: one blocking TCP connection to a storage server, speaking
// the frame protocol of common/frame.h with one request outstanding at a
// time. Used by the client library (pooled, one per in-flight request) and
// by the metadata service (to trim reclaimed files).
//
// After a transport failure (timeout, reset, malformed reply) the connection
// is broken(): callers drop it and dial again. An error the server reports
// (ResponseHeader.error) leaves the connection usable.
//
// Thread-safety: not thread-safe; one thread uses a connection at a time.
#ifndef CKPTFS_COMMON_DATA_CONNECTION_H_
#define CKPTFS_COMMON_DATA_CONNECTION_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tcp.h"
#include "common/unique_fd.h"
#include "proto/data.pb.h"

namespace ckptfs {

class DataConnection {
 public:
  // Dials `server`; the timeout bounds the connect and every later send and
  // receive on the connection.
  static absl::StatusOr<std::unique_ptr<DataConnection>> Connect(const HostPort& server,
                                                                 absl::Duration timeout);

  DataConnection(const DataConnection&) = delete;
  DataConnection& operator=(const DataConnection&) = delete;

  struct Response {
    data::ResponseHeader header;
    size_t payload_len = 0;  // bytes written to the caller's buffer
  };

  // Sends `request` (its request_id is set here) with payload[0, payload_len)
  // and waits for the response. A response payload (READ) lands in
  // out[0, out_capacity); a larger one is a protocol error. A server-side
  // failure comes back as ErrnoStatus(header.error, "storage server ADDR: …");
  // READ payloads are checked against their CRC32C (EBADMSG on mismatch).
  absl::StatusOr<Response> Call(data::RequestHeader request, const void* payload,
                                size_t payload_len, void* out, size_t out_capacity);

  bool broken() const { return broken_; }
  const HostPort& server() const { return server_; }

 private:
  DataConnection(HostPort server, UniqueFd fd) : server_(std::move(server)), fd_(std::move(fd)) {}
  absl::Status Broken(absl::Status status);

  HostPort server_;
  UniqueFd fd_;
  uint64_t next_request_id_ = 1;
  bool broken_ = false;
};

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_DATA_CONNECTION_H_
