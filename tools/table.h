// Plain-text tables and byte counts for the `ckptfs` command's output, and
// the scrub and repair parts of `ckptfs status` (kept here, beside the table
// code they use, so that tests/tools/table_test.cc checks them without a
// cluster). Thread-safe (pure functions).
#ifndef CKPTFS_TOOLS_TABLE_H_
#define CKPTFS_TOOLS_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/meta.pb.h"

namespace ckptfs::tools {

// Rows of cells, left-aligned in columns two spaces apart; the first row is
// the header. Each line ends with '\n'; trailing spaces are trimmed.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// 1536 -> "1.5 KiB"; below 1 KiB, "N B".
std::string FormatBytes(uint64_t bytes);

// The headers of the scrub columns of the servers table, and the cells of
// one server under them: chunks checked, corrupt chunks found, whole passes
// over its store; "-" in each when its heartbeats carry no scrub report,
// and "off" (then "-") when it reports scrubbing off and has checked none.
std::vector<std::string> ScrubHeaders();
std::vector<std::string> ScrubCells(const meta::ServerStatus& server);

// The "repair:" block of `ckptfs status`: who repairs, whether its pass runs
// or when it ended, its counts and its last problem; `reported_ms` (when the
// service got the report) and `now_ms` are the service's clock, the
// report's own times the repairer's. Lines end with '\n'.
std::string FormatRepairReport(const meta::RepairReport& report, int64_t reported_ms,
                               int64_t now_ms);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_TABLE_H_
