// Tests of the text-table helpers (table.h).
#include "tools/table.h"

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

}  // namespace
}  // namespace ckptfs::tools
