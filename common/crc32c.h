// CRC32C (Castagnoli), the checksum on every stored chunk, computed with
// ISA-L at memory speed. Standard CRC32C: Crc32c("123456789") == 0xE3069283.
// Thread-safe (pure functions).
#ifndef CKPTFS_COMMON_CRC32C_H_
#define CKPTFS_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace ckptfs {

// CRC32C of data[0, size).
uint32_t Crc32c(const void* data, size_t size);

// Extends `crc` (a previous Crc32c result, or 0 for none) with more bytes:
// Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_CRC32C_H_
