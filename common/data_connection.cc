// See data_connection.h.
#include "common/data_connection.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/frame.h"

namespace ckptfs {

absl::StatusOr<std::unique_ptr<DataConnection>> DataConnection::Connect(const HostPort& server,
                                                                        absl::Duration timeout) {
  auto fd = ConnectTcp(server, timeout);
  if (!fd.ok()) {
    return ErrnoStatusWithCode(absl::StatusCode::kUnavailable, ErrnoFromStatus(fd.status()),
                               absl::StrCat("storage server ", server.ToString(),
                                            " unreachable: ", fd.status().message()));
  }
  if (absl::Status s = SetSocketTimeouts(fd->get(), timeout); !s.ok()) return s;
  return std::unique_ptr<DataConnection>(new DataConnection(server, *std::move(fd)));
}

absl::Status DataConnection::Broken(absl::Status status) {
  broken_ = true;
  fd_.Reset();
  return ErrnoStatusWithCode(
      absl::StatusCode::kUnavailable, ErrnoFromStatus(status) == 0 ? EIO : ErrnoFromStatus(status),
      absl::StrCat("storage server ", server_.ToString(), ": ", status.message()));
}

absl::StatusOr<DataConnection::Response> DataConnection::Call(data::RequestHeader request,
                                                              const void* payload,
                                                              size_t payload_len, void* out,
                                                              size_t out_capacity) {
  if (broken_) {
    return ErrnoStatusWithCode(
        absl::StatusCode::kUnavailable, EIO,
        absl::StrCat("storage server ", server_.ToString(), ": connection already broken"));
  }
  const uint64_t id = next_request_id_++;
  request.set_request_id(id);
  if (absl::Status s = WriteFrame(fd_.get(), request, payload, payload_len); !s.ok()) {
    return Broken(s);
  }
  Response response;
  auto prefix = ReadFrameHead(fd_.get(), response.header);
  if (!prefix.ok()) {
    if (IsEndOfStream(prefix.status())) {
      return Broken(ErrnoStatus(ECONNRESET, "connection closed by the server"));
    }
    return Broken(prefix.status());
  }
  if (response.header.request_id() == 0 && response.header.error() != 0) {
    // The server refused the connection itself (over its connection limit,
    // or it could not parse what we sent) and is closing it: keep its errno
    // (EAGAIN says "retry later") rather than calling the reply garbled.
    return Broken(ErrnoStatus(response.header.error(), response.header.message()));
  }
  if (response.header.request_id() != id) {
    return Broken(ErrnoStatus(
        EBADMSG,
        absl::StrCat("reply for request ", response.header.request_id(), ", expected ", id)));
  }
  if (prefix->payload_len > out_capacity) {
    return Broken(
        ErrnoStatus(EBADMSG, absl::StrCat("reply payload of ", prefix->payload_len,
                                          " bytes exceeds the ", out_capacity, " asked for")));
  }
  if (prefix->payload_len > 0) {
    if (absl::Status s = RecvAll(fd_.get(), out, prefix->payload_len); !s.ok()) {
      // A close after a head that promised payload is a cut, not a clean end.
      return Broken(IsEndOfStream(s)
                        ? ErrnoStatus(ECONNRESET, "connection closed inside a reply's payload")
                        : s);
    }
  }
  response.payload_len = prefix->payload_len;
  if (response.header.error() != 0) {
    return ErrnoStatus(response.header.error(), absl::StrCat("storage server ", server_.ToString(),
                                                             ": ", response.header.message()));
  }
  if (response.payload_len > 0 &&
      Crc32c(out, response.payload_len) != response.header.payload_crc32c()) {
    return ErrnoStatus(
        EBADMSG, absl::StrCat("storage server ", server_.ToString(), ": CRC32C mismatch on chunk ",
                              request.chunk_index(), " of inode ", request.ino(), " in transit"));
  }
  return response;
}

}  // namespace ckptfs
