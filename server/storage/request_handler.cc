// See request_handler.h.
#include "server/storage/request_handler.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/metrics/errno_counters.h"
#include "common/metrics/metrics.h"

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

// Per-op metrics of the data path (children looked up once).
struct OpMetrics {
  metrics::Counter* requests;
  metrics::Histogram* latency;
};

class StorageMetrics {
 public:
  static StorageMetrics& Get() {
    static StorageMetrics* m = new StorageMetrics();
    return *m;
  }
  const OpMetrics& ForOp(int op) const {
    switch (op) {
      case data::WRITE:
        return ops_[0];
      case data::READ:
        return ops_[1];
      case data::TRIM:
        return ops_[2];
      case data::SYNC:
        return ops_[3];
      case data::PING:
        return ops_[4];
      case data::ADOPT:
        return ops_[5];
      default:
        return ops_[6];
    }
  }
  metrics::ErrnoCounters& errors() { return errors_; }
  metrics::Counter& written() { return *written_; }
  metrics::Counter& read() { return *read_; }

 private:
  StorageMetrics()
      : errors_(&metrics::Registry::Default().Counter(
            "ckptfs_storage_errors_total",
            "Requests answered with an error, by errno (ENOENT: a hole read; EBADMSG: a "
            "payload damaged in transit; EIO: a damaged chunk or a disk error).",
            {"kind"})) {
    metrics::Registry& r = metrics::Registry::Default();
    auto& requests =
        r.Counter("ckptfs_storage_requests_total", "Data-path requests executed, by op.", {"op"});
    auto& latency =
        r.Histogram("ckptfs_storage_request_duration_seconds",
                    "Time a request took on its disk worker (checks, chunk I/O, fsync), by op.",
                    {"op"}, metrics::LatencyBuckets());
    const char* const names[] = {"WRITE", "READ", "TRIM", "SYNC", "PING", "ADOPT", "OTHER"};
    for (int i = 0; i < 7; ++i) {
      ops_[i] = OpMetrics{&requests.WithLabels({names[i]}), &latency.WithLabels({names[i]})};
    }
    written_ = &r.Counter("ckptfs_storage_write_bytes_total",
                          "Chunk data bytes of WRITE requests received (their payloads) and "
                          "of ADOPT requests that succeeded (chunk files clients on this host "
                          "wrote).",
                          {})
                    .WithLabels({});
    read_ = &r.Counter("ckptfs_storage_read_bytes_total",
                       "Payload bytes of READ replies (chunk data sent to clients).", {})
                 .WithLabels({});
    // Kept by connection.cc; registered here so that it reads 0 from the start.
    r.Gauge("ckptfs_storage_requests_in_flight",
            "Requests received whose replies are not sent yet (on disk, queued or being sent).", {})
        .WithLabels({});
  }

  OpMetrics ops_[7];
  metrics::ErrnoCounters errors_;
  metrics::Counter* written_;
  metrics::Counter* read_;
};

}  // namespace

RequestHandler::RequestHandler(ChunkStore& store) : store_(store) { StorageMetrics::Get(); }

uint64_t RequestHandler::BytesWrittenTotal() { return StorageMetrics::Get().written().value(); }
uint64_t RequestHandler::BytesReadTotal() { return StorageMetrics::Get().read().value(); }

size_t ReadBufferSize(const data::RequestHeader& request) {
  const uint64_t end = uint64_t{request.offset()} + request.length();
  return end > kMaxChunkLength ? 0 : ChunkFileSize(end);
}

Reply RequestHandler::Handle(Ring& ring, const data::RequestHeader& request, AlignedBuffer& payload,
                             AlignedBuffer& read_buffer) {
  // Id 0 marks connection-level error frames; a request carrying it could
  // not be told apart from one (and a successful reply to it would be an
  // all-default, zero-length header, which frames cannot carry).
  StorageMetrics& m = StorageMetrics::Get();
  const absl::Time start = absl::Now();
  if (request.op() == data::WRITE) m.written().Increment(payload.size());
  absl::StatusOr<Reply> reply =
      request.request_id() == 0
          ? ErrnoStatus(EINVAL,
                        "request_id 0 is reserved for connection errors; number "
                        "requests from 1")
          : Execute(ring, request, payload, read_buffer);
  // An ADOPT stores its bytes only when it succeeds (a refused one is sent
  // again as a WRITE).
  if (request.op() == data::ADOPT && reply.ok()) m.written().Increment(request.length());
  if (!reply.ok()) {
    int err = ErrnoFromStatus(reply.status());
    if (err == 0) err = EIO;
    m.errors().For(err).Increment();
    // ENOENT: a hole, part of normal reading; ENODATA: a merge past a
    // chunk's end, refused so that the client makes the gap explicitly.
    if (err != ENOENT && err != ENODATA) {
      CKPTFS_LOG(kWarning) << "request failed: " << reply.status().message();
    }
    Reply error;
    error.header.set_error(err);
    error.header.set_message(std::string(reply.status().message()));
    reply = std::move(error);
  }
  reply->header.set_request_id(request.request_id());
  reply->header.set_incarnation(store_.incarnation());
  m.read().Increment(reply->payload.size());
  const OpMetrics& op = m.ForOp(request.op());
  op.requests->Increment();
  op.latency->ObserveDuration(absl::Now() - start);
  return *std::move(reply);
}

absl::StatusOr<Reply> RequestHandler::Execute(Ring& ring, const data::RequestHeader& request,
                                              AlignedBuffer& payload, AlignedBuffer& read_buffer) {
  absl::Status status;
  switch (request.op()) {
    case data::WRITE: {
      absl::StatusOr<ResendFence::Scope> admitted = fence_.Admit(request);
      status = admitted.ok() ? DoWrite(ring, request, payload) : admitted.status();
      break;
    }
    case data::READ:
      return DoRead(ring, request, read_buffer);
    case data::TRIM: {
      absl::StatusOr<ResendFence::Scope> admitted = fence_.Admit(request);
      status = admitted.ok()
                   ? store_.Trim(ring, request.ino(), request.trim_size(), request.chunk_size())
                   : admitted.status();
      break;
    }
    case data::SYNC:
      status = CheckWrittenHere(request);
      if (!status.ok()) break;
      // whole_store: a checkpoint commit's one sync per server; ino ignored.
      status = request.whole_store() ? store_.SyncAll() : store_.Sync(ring, request.ino());
      break;
    case data::PING:
      break;
    case data::ADOPT:
      status = store_.Adopt({request.ino(), request.chunk_index()}, request.tmp_name(),
                            request.length(), request.payload_crc32c());
      break;
    default:
      status = ErrnoStatus(EOPNOTSUPP, absl::StrCat("unknown op ", static_cast<int>(request.op()),
                                                    " in request ", request.request_id()));
      break;
  }
  if (!status.ok()) return status;
  return Reply();
}

absl::Status RequestHandler::CheckWrittenHere(const data::RequestHeader& request) const {
  for (uint64_t writer : request.written_by()) {
    if (writer == store_.incarnation()) continue;
    return ErrnoStatus(
        EIO, absl::StrCat(
                 "this server restarted since it acknowledged writes this sync must "
                 "make durable (",
                 request.whole_store() ? "the whole store" : absl::StrCat("inode ", request.ino()),
                 "; written by incarnation 0x", absl::Hex(writer), ", now incarnation 0x",
                 absl::Hex(store_.incarnation()),
                 "): what that run had not synced may be lost; write it again"));
  }
  return absl::OkStatus();
}

absl::Status RequestHandler::DoWrite(Ring& ring, const data::RequestHeader& request,
                                     AlignedBuffer& payload) {
  const uint32_t crc = Crc32c(payload.data(), payload.size());
  if (crc != request.payload_crc32c()) {
    return ErrnoStatus(
        EBADMSG, absl::StrCat("payload of ", payload.size(), " bytes for ", ChunkName(request),
                              " has CRC32C 0x", absl::Hex(crc), ", header says 0x",
                              absl::Hex(request.payload_crc32c()), ": damaged in transit"));
  }
  if (absl::Status s = CheckRange(request, payload.size(), "write"); !s.ok()) return s;
  if (request.only_if_absent()) {
    if (!request.replace() || request.offset() != 0) {
      return ErrnoStatus(EINVAL, absl::StrCat("only_if_absent write of ", ChunkName(request),
                                              " must replace the whole chunk from offset 0"));
    }
    return store_.Fill(ring, {request.ino(), request.chunk_index()}, payload, crc);
  }
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
