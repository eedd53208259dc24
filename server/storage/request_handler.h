// RequestHandler: executes one data-path request (WRITE, READ, TRIM, SYNC,
// PING) against the ChunkStore and builds its response.
//
// It knows nothing of sockets: the blocking per-connection loop of today
// (connection.h) and a later io_uring network loop both hand it a parsed
// header and a payload already received into an aligned buffer, and send
// back what it returns. Validation of the request's fields (payload CRC,
// offsets and lengths against the 64 MiB chunk limit, unknown ops) happens
// here; framing errors are the caller's.
//
// Thread-safety: Handle() may run concurrently on many threads, each with its
// own Ring and buffers. The ChunkStore and BufferPool must outlive the
// handler.
#ifndef CKPTFS_SERVER_STORAGE_REQUEST_HANDLER_H_
#define CKPTFS_SERVER_STORAGE_REQUEST_HANDLER_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/uring.h"
#include "proto/data.pb.h"
#include "server/storage/aligned_buffer.h"
#include "server/storage/buffer_pool.h"
#include "server/storage/chunk_store.h"

namespace ckptfs::storage {

struct Reply {
  data::ResponseHeader header;
  // READ: the bytes to send after the header; points into `buffer`. Empty
  // otherwise.
  absl::string_view payload;
  // READ: owns the payload's memory, taken from the pool; the caller gives
  // it back once the reply is sent.
  AlignedBuffer buffer;
};

class RequestHandler {
 public:
  RequestHandler(ChunkStore& store, BufferPool& buffers) : store_(store), buffers_(buffers) {}

  // Executes `request` whose payload is payload.view(). Never fails as a
  // call: every error is an errno and message in the reply header, with the
  // request's id echoed. `payload`'s padding may be overwritten.
  Reply Handle(Ring& ring, const data::RequestHeader& request, AlignedBuffer& payload);

 private:
  // The reply of a successful request (its id set by Handle), or why it
  // failed.
  absl::StatusOr<Reply> Execute(Ring& ring, const data::RequestHeader& request,
                                AlignedBuffer& payload);
  absl::Status DoWrite(Ring& ring, const data::RequestHeader& request, AlignedBuffer& payload);
  absl::StatusOr<Reply> DoRead(Ring& ring, const data::RequestHeader& request);

  ChunkStore& store_;
  BufferPool& buffers_;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_REQUEST_HANDLER_H_
