// Plain-text tables and byte counts for the `ckptfs` command's output.
// Thread-safe (pure functions).
#ifndef CKPTFS_TOOLS_TABLE_H_
#define CKPTFS_TOOLS_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ckptfs::tools {

// Rows of cells, left-aligned in columns two spaces apart; the first row is
// the header. Each line ends with '\n'; trailing spaces are trimmed.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// 1536 -> "1.5 KiB"; below 1 KiB, "N B".
std::string FormatBytes(uint64_t bytes);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_TABLE_H_
