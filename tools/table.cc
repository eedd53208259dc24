// See table.h.
#include "tools/table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/mount_transactions.h"

namespace ckptfs::tools {

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (row.size() > widths.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string FormatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::vector<std::string> ScrubHeaders() { return {"SCRUBBED", "CORRUPT", "PASSES"}; }

std::vector<std::string> ScrubCells(const meta::ServerStatus& server) {
  if (!server.has_scrub()) return {"-", "-", "-"};
  const meta::ScrubReport& scrub = server.scrub();
  if (scrub.bytes_per_s_limit() == 0 && scrub.chunks_checked() == 0) return {"off", "-", "-"};
  return {absl::StrCat(scrub.chunks_checked(), " chunks"), absl::StrCat(scrub.corrupt_found()),
          absl::StrCat(scrub.passes_completed())};
}

std::string FormatRepairReport(const meta::RepairReport& report, int64_t reported_ms,
                               int64_t now_ms) {
  std::string pass;
  if (report.pass_ended_ms() == 0) {
    pass = absl::StrCat(
        "pass ", report.passes_completed() + 1, " running",
        report.pass_started_ms() == 0
            ? std::string()
            : absl::StrCat(", started ", FormatAge(now_ms - report.pass_started_ms()), " ago"));
  } else {
    pass = absl::StrCat("pass ", report.passes_completed(), " ended ",
                        FormatAge(now_ms - report.pass_ended_ms()), " ago");
  }
  std::string out =
      absl::StrCat("repair: ", report.repairer().empty() ? "?" : report.repairer(), ", ", pass,
                   " (reported ", FormatAge(now_ms - reported_ms), " ago)\n");
  const std::vector<std::vector<std::string>> rows = {
      {"files checked", absl::StrCat(report.files_checked(), "/", report.files_total())},
      {"chunks checked", absl::StrCat(report.chunks_checked())},
      {"copies rebuilt", absl::StrCat(report.copies_rebuilt())},
      {"copies moved", absl::StrCat(report.copies_moved())},
      {"bytes written", FormatBytes(report.bytes_written())},
      {"unrepairable", absl::StrCat(report.files_unrepairable(), " file",
                                    report.files_unrepairable() == 1 ? "" : "s")},
      {"last problem", report.last_problem().empty() ? "none" : report.last_problem()},
  };
  // Aligned as a table, indented under the "repair:" line.
  const std::string table = FormatTable(rows);
  size_t start = 0;
  while (start < table.size()) {
    const size_t end = table.find('\n', start);
    absl::StrAppend(&out, "  ", table.substr(start, end - start + 1));
    start = end + 1;
  }
  return out;
}

}  // namespace ckptfs::tools
