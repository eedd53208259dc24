// See crc32c.h. ISA-L's crc32_iscsi takes and returns the raw (non-inverted)
// register and an int length, so we invert around it and feed large buffers
// in pieces.
#include "common/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>

namespace ckptfs {

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  uint32_t reg = ~crc;
  auto* bytes = static_cast<unsigned char*>(const_cast<void*>(data));
  constexpr size_t kPiece = size_t{1} << 30;
  while (size > 0) {
    const size_t n = std::min(size, kPiece);
    reg = crc32_iscsi(bytes, static_cast<int>(n), reg);
    bytes += n;
    size -= n;
  }
  return ~reg;
}

uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

}  // namespace ckptfs
