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
    return ErrnoStatus(EINVAL, absl::StrCat(what, " of ", length, " bytes at offset ",
                                            request.offset(), " of ", ChunkName(request),
                                            " reaches past the ", kMaxChunkLength,
                                            "-byte chunk limit"));
  }
  return absl::OkStatus();
}

}  // namespace

Reply RequestHandler::Handle(Ring& ring, const data::RequestHeader& request,
                             AlignedBuffer& payload) {
  Reply reply;
  reply.header.set_request_id(request.request_id());
  const ChunkKey key{request.ino(), request.chunk_index()};
  absl::Status status;
  switch (request.op()) {
    case data::WRITE: {
      const uint32_t crc = Crc32c(payload.data(), payload.size());
      if (crc != request.payload_crc32c()) {
        status = ErrnoStatus(EBADMSG, absl::StrCat("payload of ", payload.size(),
                                                   " bytes for ", ChunkName(request),
                                                   " has CRC32C 0x", absl::Hex(crc),
                                                   ", header says 0x",
                                                   absl::Hex(request.payload_crc32c()),
                                                   ": damaged in transit"));
        break;
      }
      status = CheckRange(request, payload.size(), "write");
      if (status.ok()) {
        status = store_.Write(ring, key, request.offset(), payload, request.replace(), crc);
      }
      break;
    }
    case data::READ: {
      status = CheckRange(request, request.length(), "read");
      if (!status.ok()) break;
      // Room for the whole chunk file when the chunk ends within the range
      // asked for (the usual case); Read grows the buffer otherwise.
      auto buffer = buffers_.Take(
          ChunkFileSize(std::min<uint64_t>(uint64_t{request.offset()} + request.length(),
                                           kMaxChunkLength)));
      if (!buffer.ok()) {
        status = buffer.status();
        break;
      }
      reply.buffer = *std::move(buffer);
      auto slice = store_.Read(ring, reply.buffer, key, request.offset(), request.length());
      if (!slice.ok()) {
        status = slice.status();
        break;
      }
      reply.payload = slice->data;
      reply.header.set_chunk_length(slice->chunk_length);
      reply.header.set_payload_crc32c(slice->data_crc32c);
      break;
    }
    case data::TRIM:
      status = store_.Trim(ring, request.ino(), request.trim_size(), request.chunk_size());
      break;
    case data::SYNC:
      status = store_.Sync(ring, request.ino());
      break;
    case data::PING:
      break;
    default:
      status = ErrnoStatus(EOPNOTSUPP, absl::StrCat("unknown op ", static_cast<int>(request.op()),
                                                    " in request ", request.request_id()));
      break;
  }
  if (!status.ok()) {
    int err = ErrnoFromStatus(status);
    if (err == 0) err = EIO;
    reply.header.set_error(err);
    reply.header.set_message(std::string(status.message()));
    reply.payload = absl::string_view();
    if (err != ENOENT) {
      CKPTFS_LOG(kWarning) << "request failed: " << status.message();
    }
  }
  return reply;
}

}  // namespace ckptfs::storage
