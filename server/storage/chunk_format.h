// The on-disk format of one chunk file, <data_dir>/chunks/<ino>/<index>:
//
//   block 0 (4096 bytes): header, little-endian
//     u32 magic "CKC1" | u32 format version (1) | u64 ino | u32 chunk index |
//     u32 data length | u32 CRC32C of the data | u32 CRC32C of the 28 bytes
//     before it | zeros
//   blocks 1..: the data, zero-padded to a whole number of 4096-byte blocks.
//
// Whole blocks keep every transfer O_DIRECT-able. The header names its own
// chunk, so a file copied or renamed to the wrong place is caught, and has
// its own CRC so that a torn header is told apart from torn data.
//
// Thread-safety: pure functions.
#ifndef CKPTFS_SERVER_STORAGE_CHUNK_FORMAT_H_
#define CKPTFS_SERVER_STORAGE_CHUNK_FORMAT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/storage/aligned_buffer.h"

namespace ckptfs::storage {

inline constexpr uint32_t kChunkMagic = 0x31434b43;  // "CKC1" little-endian
inline constexpr uint32_t kChunkFormatVersion = 1;
// Bytes of the header block; the data starts at this file offset.
inline constexpr size_t kChunkHeaderSize = kBlockSize;

// Identifies a chunk: bytes [index * chunk_size, (index + 1) * chunk_size)
// of inode `ino`.
struct ChunkKey {
  uint64_t ino = 0;
  uint32_t index = 0;
};

struct ChunkHeader {
  ChunkKey key;
  uint32_t data_length = 0;
  uint32_t data_crc32c = 0;
};

// The size of a chunk file holding `data_length` bytes.
inline constexpr size_t ChunkFileSize(size_t data_length) {
  return kChunkHeaderSize + RoundUpToBlock(data_length);
}

// Fills block[0, kChunkHeaderSize) with the encoded header.
void EncodeChunkHeader(const ChunkHeader& header, char* block);

// Decodes and checks a header block: magic, version and the header's own
// CRC. EIO naming `what` (e.g. the file path) when any is wrong.
// REQUIRES: block.size() >= kChunkHeaderSize.
absl::StatusOr<ChunkHeader> DecodeChunkHeader(absl::string_view block,
                                              absl::string_view what);

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_CHUNK_FORMAT_H_
