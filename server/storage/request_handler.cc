// See request_handler.h.
#include "server/storage/request_handler.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::storage {
namespace {

std::string ChunkName(const data::RequestHeader& request) {
  return absl::StrCat("chunk ", request.chunk_index(), " of inode ", request.ino());
}

// EINVAL unless [offset, offset + length) lies within the largest chunk.
absl::Status CheckRange(const data::RequestHeader& request, uint64_t length,
                        absl::string_view what) {
  if (uint64_t{request.offset()} + length > kMaxChunkLength) {
    return ErrnoStatus(
        EINVAL, absl::StrCat(what, " of ", length, " bytes at offset ", request.offset(), " of ",
                             ChunkName(request), " reaches past the ", kMaxChunkLength,
                             "-byte chunk limit"));
  }
  return absl::OkStatus();
}

}  // namespace

size_t ReadBufferSize(const data::RequestHeader& request) {
  const uint64_t end = uint64_t{request.offset()} + request.length();
  return end > kMaxChunkLength ? 0 : ChunkFileSize(end);
}

Reply RequestHandler::Handle(Ring& ring, const data::RequestHeader& request,
                             AlignedBuffer& payload, AlignedBuffer& read_buffer) {
  // Id 0 marks connection-level error frames; a request carrying it could
  // not be told apart from one (and a successful reply to it would be an
  // all-default, zero-length header, which frames cannot carry).
  absl::StatusOr<Reply> reply =
      request.request_id() == 0
          ? ErrnoStatus(EINVAL, "request_id 0 is reserved for connection errors; number "
                                "requests from 1")
          : Execute(ring, request, payload, read_buffer);
  if (!reply.ok()) {
    int err = ErrnoFromStatus(reply.status());
    if (err == 0) err = EIO;
    if (err != ENOENT) {  // ENOENT: a hole, part of normal reading
      CKPTFS_LOG(kWarning) << "request failed: " << reply.status().message();
    }
    Reply error;
    error.header.set_error(err);
    error.header.set_message(std::string(reply.status().message()));
    reply = std::move(error);
  }
  reply->header.set_request_id(request.request_id());
  return *std::move(reply);
}

absl::StatusOr<Reply> RequestHandler::Execute(Ring& ring, const data::RequestHeader& request,
                                              AlignedBuffer& payload,
                                              AlignedBuffer& read_buffer) {
  absl::Status status;
  switch (request.op()) {
    case data::WRITE:
      status = DoWrite(ring, request, payload);
      break;
    case data::READ:
      return DoRead(ring, request, read_buffer);
    case data::TRIM:
      status = store_.Trim(ring, request.ino(), request.trim_size(), request.chunk_size());
      break;
    case data::SYNC:
      // whole_store: a checkpoint commit's one sync per server; ino ignored.
      status = request.whole_store() ? store_.SyncAll() : store_.Sync(ring, request.ino());
      break;
    case data::PING:
      break;
    default:
      status = ErrnoStatus(EOPNOTSUPP, absl::StrCat("unknown op ", static_cast<int>(request.op()),
                                                    " in request ", request.request_id()));
      break;
  }
  if (!status.ok()) return status;
  return Reply();
}

absl::Status RequestHandler::DoWrite(Ring& ring, const data::RequestHeader& request,
                                     AlignedBuffer& payload) {
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  if (crc != request.payload_crc32c()) {
    return ErrnoStatus(EBADMSG, absl::StrCat("payload of ", payload.size(), " bytes for ",
                                             ChunkName(request), " has CRC32C 0x",
                                             absl::Hex(crc), ", header says 0x",
                                             absl::Hex(request.payload_crc32c()),
                                             ": damaged in transit"));
  }
  if (absl::Status s = CheckRange(request, payload.size(), "write"); !s.ok()) return s;
  return store_.Write(ring, {request.ino(), request.chunk_index()}, request.offset(), payload,
                      request.replace(), crc);
}

absl::StatusOr<Reply> RequestHandler::DoRead(Ring& ring, const data::RequestHeader& request,
                                             AlignedBuffer& read_buffer) {
  if (absl::Status s = CheckRange(request, request.length(), "read"); !s.ok()) return s;
  auto slice = store_.Read(ring, read_buffer, {request.ino(), request.chunk_index()},
                           request.offset(), request.length());
  if (!slice.ok()) return slice.status();
  Reply reply;
  reply.payload = slice->data;
  reply.header.set_chunk_length(slice->chunk_length);
  reply.header.set_payload_crc32c(slice->data_crc32c);
  return reply;
}

}  // namespace ckptfs::storage
