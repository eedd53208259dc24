// Tests of the text-table helpers and the scrub and repair parts of
// `ckptfs status` (tools/table.h).
#include "tools/table.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ckptfs::tools {
namespace {

TEST(TableTest, AlignsColumns) {
  EXPECT_EQ(FormatTable({{"ROLE", "PID"}, {"storage-0", "12"}, {"meta", "3456"}}),
            "ROLE       PID\n"
            "storage-0  12\n"
            "meta       3456\n");
}

TEST(TableTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 30), "3.0 GiB");
}

TEST(TableTest, ScrubCellsShowTheReportOrADash) {
  meta::ServerStatus server;
  EXPECT_EQ(ScrubCells(server), (std::vector<std::string>{"-", "-", "-"}));
  EXPECT_EQ(ScrubHeaders().size(), ScrubCells(server).size());
  meta::ScrubReport* scrub = server.mutable_scrub();
  scrub->set_bytes_per_s_limit(64 << 20);
  scrub->set_chunks_checked(1234);
  scrub->set_corrupt_found(3);
  scrub->set_passes_completed(2);
  EXPECT_EQ(ScrubCells(server), (std::vector<std::string>{"1234 chunks", "3", "2"}));
  // Reported, but scrubbing is off and nothing was checked.
  *server.mutable_scrub() = meta::ScrubReport();
  EXPECT_EQ(ScrubCells(server), (std::vector<std::string>{"off", "-", "-"}));
}

TEST(TableTest, RepairReportOfAPassThatEnded) {
  const int64_t now_ms = 1'700'000'000'000;
  meta::RepairReport report;
  report.set_repairer("node7 pid 4242");
  report.set_passes_completed(3);
  report.set_pass_started_ms(now_ms - 600'000);
  report.set_pass_ended_ms(now_ms - 90'000);
  report.set_files_total(10);
  report.set_files_checked(10);
  report.set_chunks_checked(70);
  report.set_copies_rebuilt(5);
  report.set_copies_moved(6);
  report.set_bytes_written(uint64_t{11} << 20);
  report.set_files_unrepairable(1);
  report.set_last_problem("inode 42: no good copy of chunk 3");
  EXPECT_EQ(FormatRepairReport(report, now_ms - 4'000, now_ms),
            "repair: node7 pid 4242, pass 3 ended 90s ago (reported 4s ago)\n"
            "  files checked   10/10\n"
            "  chunks checked  70\n"
            "  copies rebuilt  5\n"
            "  copies moved    6\n"
            "  bytes written   11.0 MiB\n"
            "  unrepairable    1 file\n"
            "  last problem    inode 42: no good copy of chunk 3\n");
}

TEST(TableTest, RepairReportOfARunningPass) {
  const int64_t now_ms = 1'700'000'000'000;
  meta::RepairReport report;
  report.set_repairer("node7 pid 4242");
  report.set_passes_completed(3);
  report.set_pass_started_ms(now_ms - 300'000);
  report.set_files_total(40);
  report.set_files_checked(12);
  const std::string text = FormatRepairReport(report, now_ms, now_ms);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "repair: node7 pid 4242, pass 4 running, started 5m ago (reported 0s ago)");
  EXPECT_NE(text.find("  files checked   12/40\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  unrepairable    0 files\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  last problem    none\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace ckptfs::tools
