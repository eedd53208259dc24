// Layout math: where the bytes of a file live.
//
// A file is a sequence of fixed-size chunks; chunk i holds the file bytes
// [i * chunk_size, (i + 1) * chunk_size) and is stored on the storage
// servers stripe[(i + r) % stripe.size()], r in [0, replicas) (proto/
// meta.proto, Layout): its placement, in common/placement.h — the one place
// that says which servers hold a chunk, so a later redundancy scheme
// (erasure coding: fragments instead of copies) changes it there. Everything here is pure
// arithmetic on 64-bit offsets, so it is safe from any thread and is what
// the unit tests pin down byte for byte.
#ifndef CKPTFS_CLIENT_LAYOUT_H_
#define CKPTFS_CLIENT_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/placement.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

// The part of a byte range that falls into one chunk.
struct ChunkPiece {
  uint64_t chunk_index = 0;
  uint32_t offset_in_chunk = 0;  // where the piece starts within the chunk
  uint32_t length = 0;           // bytes of the piece, > 0
  uint64_t range_offset = 0;     // where the piece starts within the range

  friend bool operator==(const ChunkPiece& a, const ChunkPiece& b) {
    return a.chunk_index == b.chunk_index && a.offset_in_chunk == b.offset_in_chunk &&
           a.length == b.length && a.range_offset == b.range_offset;
  }
};

// OK when `layout` can place bytes: chunk_size > 0, a non-empty stripe and
// no more replicas than stripe servers. EIO otherwise (a service that hands
// out such a layout is broken).
absl::Status ValidateLayout(const meta::Layout& layout);

// REQUIRES (all below): chunk_size > 0.
inline uint64_t ChunkIndexOf(uint64_t file_offset, uint32_t chunk_size) {
  return file_offset / chunk_size;
}
inline uint32_t OffsetInChunk(uint64_t file_offset, uint32_t chunk_size) {
  return static_cast<uint32_t>(file_offset % chunk_size);
}
inline uint64_t ChunkStart(uint64_t chunk_index, uint32_t chunk_size) {
  return chunk_index * chunk_size;
}

// How many bytes of chunk `chunk_index` lie within a file of `file_size`
// bytes: chunk_size for a chunk wholly inside, less for the last one, 0 for
// chunks at or past the end.
uint32_t ChunkLengthInFile(uint64_t chunk_index, uint32_t chunk_size, uint64_t file_size);

// Number of chunks a file of `file_size` bytes spans (0 for an empty file).
uint64_t ChunkCount(uint64_t file_size, uint32_t chunk_size);

// Splits [offset, offset + length) into its per-chunk pieces, in file order.
// An empty range yields no pieces.
std::vector<ChunkPiece> SplitRange(uint64_t offset, uint64_t length, uint32_t chunk_size);

// Which servers hold which copies (ReplicaCount, ReplicaServer,
// ReplicaServers, ServersHoldingChunks) is common/placement.h, shared with
// the metadata service and the tools.

// The storage server id holding copy 0 of chunk `chunk_index`.
// REQUIRES: ValidateLayout(layout).ok().
inline uint32_t ServerForChunk(const meta::Layout& layout, uint64_t chunk_index) {
  return ReplicaServer(layout, chunk_index, 0);
}

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_LAYOUT_H_
