// FuzzFrame: see fuzz_targets.h.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/chunk_format.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "common/unique_fd.h"
#include "proto/data.pb.h"
#include "server/storage/chunk_store.h"
#include "server/storage/request_handler.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_targets.h"

namespace ckptfs::fuzz {
namespace {

// The most the blocking reader is fed (a socket buffer's worth, so that
// writing it all before reading never blocks).
constexpr size_t kMaxSocketBytes = 64 * 1024;

void CheckRefusal(const absl::Status& status, absl::string_view where) {
  FUZZ_CHECK(ErrnoFromStatus(status) != 0,
             absl::StrCat(where, " refused without an errno: ", status.ToString()));
  FUZZ_CHECK(!status.message().empty(), absl::StrCat(where, " refused without a message"));
}

// One prefix: accepted ones are within the limits and encode back to the
// same bytes.
absl::StatusOr<FramePrefix> CheckPrefix(absl::string_view bytes, uint32_t max_payload) {
  auto prefix = DecodeFramePrefix(bytes, max_payload);
  if (!prefix.ok()) {
    CheckRefusal(prefix.status(), "DecodeFramePrefix");
    return prefix;
  }
  FUZZ_CHECK(prefix->header_len >= 1 && prefix->header_len <= kMaxFrameHeader,
             absl::StrCat("header_len ", prefix->header_len));
  FUZZ_CHECK(prefix->payload_len <= max_payload,
             absl::StrCat("payload_len ", prefix->payload_len, " over ", max_payload));
  char again[kFramePrefixSize];
  EncodeFramePrefix(*prefix, again);
  FUZZ_CHECK(std::memcmp(again, bytes.data(), kFramePrefixSize) == 0,
             "prefix does not encode back to its bytes");
  return prefix;
}

// The storage server's receive path (server/storage/connection.cc) over a
// byte stream, without the socket: prefix, header, the lease its op asks
// for, then the payload. Stops at the first malformed or truncated frame,
// as the server closes the connection there.
void RequestStream(absl::string_view stream) {
  while (!stream.empty()) {
    auto prefix = CheckPrefix(stream, kMaxFramePayload);
    if (!prefix.ok()) return;
    stream.remove_prefix(std::min(stream.size(), kFramePrefixSize));
    if (stream.size() < prefix->header_len) return;  // closed inside the frame
    data::RequestHeader header;
    if (!header.ParseFromArray(stream.data(), static_cast<int>(prefix->header_len))) return;
    stream.remove_prefix(prefix->header_len);
    // The buffer the connection takes from the pool for it: a WRITE's
    // payload, a READ's chunk. Both stay within the largest chunk file,
    // whatever the header says.
    const size_t payload_part =
        header.op() == data::WRITE ? storage::RoundUpToBlock(prefix->payload_len) : 0;
    const size_t read_part = header.op() == data::READ ? storage::ReadBufferSize(header) : 0;
    FUZZ_CHECK(payload_part <= storage::RoundUpToBlock(kMaxFramePayload),
               absl::StrCat("payload buffer ", payload_part));
    FUZZ_CHECK(read_part <= ChunkFileSize(storage::kMaxChunkLength),
               absl::StrCat("read buffer ", read_part, " for offset ", header.offset(), " length ",
                            header.length()));
    if (read_part > 0) {
      FUZZ_CHECK(uint64_t{header.offset()} + header.length() <= storage::kMaxChunkLength,
                 "a read buffer for a range past the chunk limit");
    }
    if (stream.size() < prefix->payload_len) return;
    stream.remove_prefix(prefix->payload_len);
  }
}

// The chunk-file header decoder over the bytes (padded to a block).
void ChunkHeaderBlock(absl::string_view bytes) {
  std::string block(bytes.substr(0, kChunkHeaderSize));
  block.resize(kChunkHeaderSize, '\0');
  auto header = DecodeChunkHeader(block, "fuzzed chunk");
  if (!header.ok()) {
    FUZZ_CHECK(ErrnoFromStatus(header.status()) == EIO, header.status().ToString());
    return;
  }
  std::string again(kChunkHeaderSize, '\0');
  EncodeChunkHeader(*header, again.data());
  FUZZ_CHECK(again.substr(0, 32) == block.substr(0, 32),
             "a chunk header does not encode back to its bytes");
}

// The blocking reader (ReadFrameHead, DiscardPayload) over a socket holding
// the bytes, closed after them: it must end, each frame within the limits,
// with a clean end of stream or an error with an errno.
void SocketReader(absl::string_view bytes) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
  UniqueFd reader(fds[0]);
  UniqueFd writer(fds[1]);
  bytes = bytes.substr(0, kMaxSocketBytes);
  int buffer = static_cast<int>(2 * kMaxSocketBytes);
  ::setsockopt(writer.get(), SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  ::setsockopt(reader.get(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  if (!bytes.empty() && !SendAll(writer.get(), bytes.data(), bytes.size()).ok()) return;
  writer = UniqueFd();  // the peer closes after its bytes
  size_t frames = 0;
  for (;;) {
    data::ResponseHeader header;
    auto prefix = ReadFrameHead(reader.get(), header);
    if (!prefix.ok()) {
      if (!IsEndOfStream(prefix.status())) CheckRefusal(prefix.status(), "ReadFrameHead");
      break;
    }
    FUZZ_CHECK(prefix->payload_len <= kMaxFramePayload, "payload_len over the limit");
    ++frames;
    FUZZ_CHECK(frames * (kFramePrefixSize + 1) <= bytes.size(),
               "more frames read than the bytes hold");
    absl::Status discarded = DiscardPayload(reader.get(), prefix->payload_len);
    if (!discarded.ok()) {
      // The peer closed inside the frame: a reset connection, not a clean
      // end of the stream (which callers take for "no more frames").
      FUZZ_CHECK(!IsEndOfStream(discarded) && ErrnoFromStatus(discarded) == ECONNRESET,
                 absl::StrCat("DiscardPayload of ", prefix->payload_len,
                              " bytes cut off: ", discarded.ToString()));
      break;
    }
  }
}

}  // namespace

void FuzzFrame(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // A prefix alone, also against a smaller payload limit (the client's).
  (void)CheckPrefix(bytes, kMaxFramePayload);
  (void)CheckPrefix(bytes, 1u << 20);
  RequestStream(bytes);
  ChunkHeaderBlock(bytes);
  SocketReader(bytes);
}

}  // namespace ckptfs::fuzz
