// See frame.h.
#include "common/frame.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/tcp.h"

namespace ckptfs {
namespace {

void PutLe32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t GetLe32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

}  // namespace

void EncodeFramePrefix(const FramePrefix& prefix, char out[kFramePrefixSize]) {
  PutLe32(out, kFrameMagic);
  PutLe32(out + 4, prefix.header_len);
  PutLe32(out + 8, prefix.payload_len);
}

absl::StatusOr<FramePrefix> DecodeFramePrefix(absl::string_view bytes, uint32_t max_payload) {
  if (bytes.size() < kFramePrefixSize) {
    return ErrnoStatus(EBADMSG, absl::StrCat("frame prefix truncated: ", bytes.size(), " of ",
                                             kFramePrefixSize, " bytes"));
  }
  const uint32_t magic = GetLe32(bytes.data());
  if (magic != kFrameMagic) {
    return ErrnoStatus(EBADMSG, absl::StrCat("not a ckptfs frame: magic 0x", absl::Hex(magic),
                                             ", want 0x", absl::Hex(kFrameMagic)));
  }
  FramePrefix prefix;
  prefix.header_len = GetLe32(bytes.data() + 4);
  prefix.payload_len = GetLe32(bytes.data() + 8);
  if (prefix.header_len == 0 || prefix.header_len > kMaxFrameHeader) {
    return ErrnoStatus(EMSGSIZE, absl::StrCat("frame header length ", prefix.header_len,
                                              " outside 1..", kMaxFrameHeader));
  }
  if (prefix.payload_len > max_payload) {
    return ErrnoStatus(EMSGSIZE, absl::StrCat("frame payload length ", prefix.payload_len,
                                              " exceeds the limit ", max_payload));
  }
  return prefix;
}

absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& header, const void* payload,
                        size_t payload_len) {
  std::string head(kFramePrefixSize, '\0');
  const size_t header_len = header.ByteSizeLong();
  if (header_len == 0) {
    // An all-default message serializes to nothing, which no frame may carry.
    return ErrnoStatus(EINVAL,
                       "frame header is empty (every field at its default); set "
                       "request_id");
  }
  if (header_len > kMaxFrameHeader || payload_len > kMaxFramePayload) {
    return ErrnoStatus(EMSGSIZE, absl::StrCat("frame too large to send: header ", header_len,
                                              ", payload ", payload_len));
  }
  EncodeFramePrefix({static_cast<uint32_t>(header_len), static_cast<uint32_t>(payload_len)},
                    head.data());
  if (!header.AppendToString(&head)) {
    return ErrnoStatus(EINVAL, "frame header failed to serialize");
  }
  iovec iov[2] = {{head.data(), head.size()}, {const_cast<void*>(payload), payload_len}};
  return SendAll(fd, iov, payload_len > 0 ? 2 : 1);
}

absl::StatusOr<FramePrefix> ReadFrameHead(int fd, google::protobuf::MessageLite& header,
                                          uint32_t max_payload) {
  char raw[kFramePrefixSize];
  if (absl::Status s = RecvAll(fd, raw, sizeof(raw)); !s.ok()) return s;
  auto prefix = DecodeFramePrefix(absl::string_view(raw, sizeof(raw)), max_payload);
  if (!prefix.ok()) return prefix.status();
  std::string header_bytes(prefix->header_len, '\0');
  if (absl::Status s = RecvAll(fd, header_bytes.data(), header_bytes.size()); !s.ok()) {
    return IsEndOfStream(s) ? ErrnoStatus(ECONNRESET, "connection closed inside a frame") : s;
  }
  if (!header.ParseFromString(header_bytes)) {
    return ErrnoStatus(EBADMSG, "frame header is not a valid protobuf message");
  }
  return *prefix;
}

absl::Status DiscardPayload(int fd, size_t size) {
  char sink[64 * 1024];
  while (size > 0) {
    const size_t n = std::min(size, sizeof(sink));
    if (absl::Status s = RecvAll(fd, sink, n); !s.ok()) {
      // A close between two pieces is still inside the frame (RecvAll
      // would call it a clean end of stream, which maps to EFBIG).
      if (!IsEndOfStream(s)) return s;
      return ErrnoStatus(ECONNRESET, absl::StrCat("connection closed inside a frame's payload, ",
                                                  size, " bytes short"));
    }
    size -= n;
  }
  return absl::OkStatus();
}

}  // namespace ckptfs
