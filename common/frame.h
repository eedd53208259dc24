// The data-path frame: u32 magic "CKF1" | u32 header_len | u32 payload_len |
// header (protobuf) | payload (raw bytes). Little-endian integers.
//
// Parsing is split so that payload bytes land directly in the caller's
// buffer (one copy per hop): read the 12-byte prefix, validate it, read the
// header, then read the payload wherever it belongs. The pure functions are
// what unit tests and fuzzers exercise. Thread-safe (no state).
#ifndef CKPTFS_COMMON_FRAME_H_
#define CKPTFS_COMMON_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"

namespace ckptfs {

inline constexpr uint32_t kFrameMagic = 0x31464b43;  // "CKF1" little-endian
inline constexpr size_t kFramePrefixSize = 12;
inline constexpr uint32_t kMaxFrameHeader = 4096;
// The largest payload a frame may carry: the largest chunk.
inline constexpr uint32_t kMaxFramePayload = 64u << 20;

struct FramePrefix {
  uint32_t header_len = 0;
  uint32_t payload_len = 0;
};

// Encodes the prefix for a frame. REQUIRES: lengths within the limits.
void EncodeFramePrefix(const FramePrefix& prefix, char out[kFramePrefixSize]);

// Decodes and validates a prefix: wrong magic, an empty or oversized header,
// or a payload over `max_payload` fail with EBADMSG / EMSGSIZE and say which.
absl::StatusOr<FramePrefix> DecodeFramePrefix(absl::string_view bytes,
                                              uint32_t max_payload = kMaxFramePayload);

// Writes one frame to a blocking socket: prefix, serialized header and the
// payload, in one sendmsg where possible.
absl::Status WriteFrame(int fd, const google::protobuf::MessageLite& header, const void* payload,
                        size_t payload_len);

// Reads a frame's prefix and header from a blocking socket into `header`.
// On success the caller must consume exactly the returned payload_len bytes
// next (RecvAll or DiscardPayload). A clean close before the frame yields
// IsEndOfStream(status); malformed input yields EBADMSG/EMSGSIZE.
absl::StatusOr<FramePrefix> ReadFrameHead(int fd, google::protobuf::MessageLite& header,
                                          uint32_t max_payload = kMaxFramePayload);

// Reads and drops `size` payload bytes (to skip a payload that is refused).
// A close before all of them came is ECONNRESET (never end of stream).
absl::Status DiscardPayload(int fd, size_t size);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_FRAME_H_
