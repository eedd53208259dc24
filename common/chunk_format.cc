// See chunk_format.h.
#include "common/chunk_format.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/errno_status.h"

namespace ckptfs {
namespace {

constexpr size_t kCoveredBytes = 28;  // bytes protected by the header CRC

void Put32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

void Put64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t Get32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

uint64_t Get64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

}  // namespace

std::string ChunksDirectory(absl::string_view data_dir) {
  return absl::StrCat(data_dir, "/chunks");
}

std::string ChunkFilePath(absl::string_view data_dir, ChunkKey key) {
  return absl::StrCat(data_dir, "/chunks/", key.ino, "/", key.index);
}

std::string TmpDirectory(absl::string_view data_dir) { return absl::StrCat(data_dir, "/tmp"); }

bool IsLocalWriteName(absl::string_view name) {
  return name.size() > kLocalWritePrefix.size() && name.size() <= 200 &&
         absl::StartsWith(name, kLocalWritePrefix) &&
         name.find_first_of(absl::string_view("/\0", 2)) == absl::string_view::npos;
}

void EncodeChunkHeader(const ChunkHeader& header, char* block) {
  std::memset(block, 0, kChunkHeaderSize);
  Put32(block, kChunkMagic);
  Put32(block + 4, kChunkFormatVersion);
  Put64(block + 8, header.key.ino);
  Put32(block + 16, header.key.index);
  Put32(block + 20, header.data_length);
  Put32(block + 24, header.data_crc32c);
  Put32(block + kCoveredBytes, Crc32c(block, kCoveredBytes));
}

absl::StatusOr<ChunkHeader> DecodeChunkHeader(absl::string_view block, absl::string_view what) {
  const char* p = block.data();
  if (Get32(p) != kChunkMagic) {
    return ErrnoStatus(
        EIO, absl::StrCat(what, ": not a chunk file (bad magic 0x", absl::Hex(Get32(p)), ")"));
  }
  if (Get32(p + kCoveredBytes) != Crc32c(p, kCoveredBytes)) {
    return ErrnoStatus(EIO, absl::StrCat(what,
                                         ": chunk header fails its CRC32C (torn or "
                                         "corrupt header)"));
  }
  if (Get32(p + 4) != kChunkFormatVersion) {
    return ErrnoStatus(EIO,
                       absl::StrCat(what, ": unsupported chunk format version ", Get32(p + 4)));
  }
  ChunkHeader header;
  header.key.ino = Get64(p + 8);
  header.key.index = Get32(p + 16);
  header.data_length = Get32(p + 20);
  header.data_crc32c = Get32(p + 24);
  return header;
}

}  // namespace ckptfs
