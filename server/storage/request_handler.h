// RequestHandler: executes one data-path request (WRITE, READ, TRIM, SYNC,
// PING) against the ChunkStore and builds its response. Every response
// carries the store's incarnation; a SYNC naming writes another incarnation
// acknowledged (written_by) fails with EIO. A WRITE or TRIM that a client
// resent after its connection failed is never applied after the resend
// (resend_fence.h).
//
// It knows nothing of sockets: the network loops (event_loop.h) hand it, on
// a disk worker thread (disk_workers.h), a parsed header and a payload
// already received into an aligned buffer, and send back what it returns.
// Validation of the request's fields (payload CRC, offsets and lengths
// against the 64 MiB chunk limit, unknown ops) happens here; framing errors
// are the caller's.
//
// Thread-safety: Handle() may run concurrently on many threads, each with its
// own Ring and buffers. The ChunkStore must outlive the handler.
#ifndef CKPTFS_SERVER_STORAGE_REQUEST_HANDLER_H_
#define CKPTFS_SERVER_STORAGE_REQUEST_HANDLER_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/uring.h"
#include "proto/data.pb.h"
#include "server/storage/aligned_buffer.h"
#include "server/storage/chunk_store.h"
#include "server/storage/resend_fence.h"

namespace ckptfs::storage {

struct Reply {
  data::ResponseHeader header;
  // READ: the bytes to send after the header; points into the caller's
  // read buffer. Empty otherwise.
  absl::string_view payload;
};

// The read buffer a READ of `request` wants: room for the whole chunk file
// when the chunk ends within the range asked for (the usual case); 0 when
// the range is invalid (the request fails before reading).
size_t ReadBufferSize(const data::RequestHeader& request);

class RequestHandler {
 public:
  // Registers the data path's request metrics (they read 0 until used).
  explicit RequestHandler(ChunkStore& store);

  // Executes `request` whose payload is payload.view(). Never fails as a
  // call: every error is an errno and message in the reply header, with the
  // request's id echoed. `payload`'s padding may be overwritten. A READ
  // reads the chunk into `read_buffer` (ReadBufferSize() bytes are enough
  // unless the chunk is longer than the range read; it grows on the heap
  // then) and the reply's payload points into it.
  Reply Handle(Ring& ring, const data::RequestHeader& request, AlignedBuffer& payload,
               AlignedBuffer& read_buffer);

  // Payload bytes stored by WRITEs and served by READs since the process
  // started, over every handler (the metrics' counters). Any thread.
  static uint64_t BytesWrittenTotal();
  static uint64_t BytesReadTotal();

 private:
  // The reply of a successful request (its id set by Handle), or why it
  // failed.
  absl::StatusOr<Reply> Execute(Ring& ring, const data::RequestHeader& request,
                                AlignedBuffer& payload, AlignedBuffer& read_buffer);
  absl::Status DoWrite(Ring& ring, const data::RequestHeader& request, AlignedBuffer& payload);
  // SYNC: EIO unless every incarnation in written_by is this server's own.
  absl::Status CheckWrittenHere(const data::RequestHeader& request) const;
  absl::StatusOr<Reply> DoRead(Ring& ring, const data::RequestHeader& request,
                               AlignedBuffer& read_buffer);

  ChunkStore& store_;
  // Orders a WRITE or TRIM against its resends (resend_fence.h).
  ResendFence fence_;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_REQUEST_HANDLER_H_
