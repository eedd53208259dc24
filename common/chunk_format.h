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
// The storage server writes these files (server/storage/chunk_store.h); a
// client on the same host may read them in place, and write a whole one
// under the server's tmp/ for the server to adopt
// (client/local_chunk_transport.h), which is why the format lives here.
//
// Thread-safety: pure functions.
#ifndef CKPTFS_COMMON_CHUNK_FORMAT_H_
#define CKPTFS_COMMON_CHUNK_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs {

inline constexpr uint32_t kChunkMagic = 0x31434b43;  // "CKC1" little-endian
inline constexpr uint32_t kChunkFormatVersion = 1;
// The unit of a chunk file: its header is one block and its data is padded
// to whole blocks.
inline constexpr size_t kChunkBlockSize = 4096;
// Bytes of the header block; the data starts at this file offset.
inline constexpr size_t kChunkHeaderSize = kChunkBlockSize;

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
  return kChunkHeaderSize + (data_length + kChunkBlockSize - 1) / kChunkBlockSize * kChunkBlockSize;
}

// Where chunk `key` lives under a storage server's data directory:
// "<data_dir>/chunks/<ino>/<index>". ChunksDirectory is "<data_dir>/chunks",
// which holds one directory per inode.
std::string ChunksDirectory(absl::string_view data_dir);
std::string ChunkFilePath(absl::string_view data_dir, ChunkKey key);

// Where chunk files are written before they are renamed into place:
// "<data_dir>/tmp". A client on the same host names the files it writes
// there for the server to adopt (the ADOPT request, proto/data.proto) with
// kLocalWritePrefix and anything without a '/' after it; the server's own
// names never start with it.
std::string TmpDirectory(absl::string_view data_dir);
inline constexpr absl::string_view kLocalWritePrefix = "local.";
// Whether `name` may name a client's file under tmp/: the prefix, then at
// least one character, no '/', no NUL, at most 200 bytes in all.
bool IsLocalWriteName(absl::string_view name);

// Fills block[0, kChunkHeaderSize) with the encoded header.
void EncodeChunkHeader(const ChunkHeader& header, char* block);

// Decodes and checks a header block: magic, version and the header's own
// CRC. EIO naming `what` (e.g. the file path) when any is wrong.
// REQUIRES: block.size() >= kChunkHeaderSize.
absl::StatusOr<ChunkHeader> DecodeChunkHeader(absl::string_view block, absl::string_view what);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_CHUNK_FORMAT_H_
