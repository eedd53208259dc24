// See layout.h.
#include "client/layout.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/erasure_code.h"
#include "common/errno_status.h"
#include "common/placement.h"

namespace ckptfs::client {

absl::Status ValidateLayout(const meta::Layout& layout) {
  if (layout.chunk_size() == 0) return ErrnoStatus(EIO, "file layout has chunk size 0");
  if (layout.stripe_size() == 0) return ErrnoStatus(EIO, "file layout has no storage servers");
  if (layout.replicas() > static_cast<uint32_t>(layout.stripe_size())) {
    return ErrnoStatus(
        EIO, absl::StrCat("file layout has ", layout.replicas(), " replicas on a stripe of only ",
                          layout.stripe_size(), " storage servers"));
  }
  if (IsErasureCoded(layout)) {
    const uint32_t pieces = layout.ec_data() + layout.ec_parity();
    if (layout.ec_parity() == 0 || pieces > static_cast<uint32_t>(layout.stripe_size()) ||
        pieces > static_cast<uint32_t>(ErasureCode::kMaxFragments)) {
      return ErrnoStatus(EIO, absl::StrCat("file layout has erasure code ", layout.ec_data(), "+",
                                           layout.ec_parity(), " on a stripe of ",
                                           layout.stripe_size(), " storage servers"));
    }
  }
  return absl::OkStatus();
}

uint32_t ChunkLengthInFile(uint64_t chunk_index, uint32_t chunk_size, uint64_t file_size) {
  const uint64_t start = ChunkStart(chunk_index, chunk_size);
  if (file_size <= start) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(chunk_size, file_size - start));
}

uint64_t ChunkCount(uint64_t file_size, uint32_t chunk_size) {
  return file_size / chunk_size + (file_size % chunk_size != 0 ? 1 : 0);
}

std::vector<ChunkPiece> SplitRange(uint64_t offset, uint64_t length, uint32_t chunk_size) {
  std::vector<ChunkPiece> pieces;
  uint64_t done = 0;
  while (done < length) {
    const uint64_t at = offset + done;
    ChunkPiece piece;
    piece.chunk_index = ChunkIndexOf(at, chunk_size);
    piece.offset_in_chunk = OffsetInChunk(at, chunk_size);
    piece.length = static_cast<uint32_t>(
        std::min<uint64_t>(chunk_size - piece.offset_in_chunk, length - done));
    piece.range_offset = done;
    pieces.push_back(piece);
    done += piece.length;
  }
  return pieces;
}

}  // namespace ckptfs::client
