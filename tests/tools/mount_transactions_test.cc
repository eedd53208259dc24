// Tests of the checkpoint info parser (common/checkpoint_info_text.h) on the
// lines the tools read, and of the xattr helpers' errors
// (tools/mount_transactions.h). The mount side is tested end to end in
// tests/integration/checkpoint_*_test.cc.
#include "tools/mount_transactions.h"

#include <cerrno>

#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs::tools {
namespace {

TEST(MountTransactionsTest, ParsesAnInfoLineWithAReasonHoldingSpaces) {
  auto c = ParseCheckpointInfo(
      "name=step_100 state=aborted ranks=4 arrived=3 files=7 bytes=123456 declared_ms=1000 "
      "first_commit_ms=2000 ended_ms=3000 timeout_s=5 errno=110 "
      "reason=rank 3 did not commit within 5 s\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "step_100");
  EXPECT_EQ(c->state(), meta::ABORTED);
  EXPECT_EQ(c->ranks(), 4u);
  EXPECT_EQ(c->arrived(), 3u);
  EXPECT_EQ(c->files(), 7u);
  EXPECT_EQ(c->bytes(), 123456u);
  EXPECT_EQ(c->declared_ms(), 1000);
  EXPECT_EQ(c->first_commit_ms(), 2000);
  EXPECT_EQ(c->ended_ms(), 3000);
  EXPECT_EQ(c->timeout_s(), 5u);
  EXPECT_EQ(c->abort_errno(), ETIMEDOUT);
  EXPECT_EQ(c->abort_reason(), "rank 3 did not commit within 5 s");
}

TEST(MountTransactionsTest, EmptyReasonAndNameWithSpace) {
  auto c = ParseCheckpointInfo("name=step\\0407\\075x state=committed ranks=2 arrived=2 reason=");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "step 7=x");
  EXPECT_EQ(c->state(), meta::COMMITTED);
  EXPECT_EQ(c->abort_reason(), "");
  EXPECT_EQ(c->abort_errno(), 0);
}

TEST(MountTransactionsTest, RejectsLinesWithoutNameOrStateOrWithBadNumbers) {
  EXPECT_FALSE(ParseCheckpointInfo("state=pending ranks=2").ok());
  EXPECT_FALSE(ParseCheckpointInfo("name=a ranks=2").ok());
  EXPECT_FALSE(ParseCheckpointInfo("name=a state=pending ranks=two").ok());
  EXPECT_FALSE(ParseCheckpointInfo("garbage").ok());
}

TEST(MountTransactionsTest, ParsesAListOfLines) {
  auto list = ParseCheckpointList(
      "name=a state=committed ranks=1 arrived=1 reason=\n"
      "name=b state=pending ranks=2 arrived=0 reason=\n");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name(), "a");
  EXPECT_EQ((*list)[1].state(), meta::PENDING);
  auto empty = ParseCheckpointList("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(MountTransactionsTest, ErrorsCarryErrnoAndItsName) {
  auto value = ReadXattr("/nonexistent/ckptfs-test", kStateXattr);
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(ErrnoFromStatus(value.status()), ENOENT);
  EXPECT_NE(value.status().message().find("(ENOENT)"), std::string::npos) << value.status();
  EXPECT_EQ(ErrnoText(ETIMEDOUT), "Connection timed out (ETIMEDOUT)");
}

TEST(MountTransactionsTest, FormatAge) {
  EXPECT_EQ(FormatAge(-5), "0s");
  EXPECT_EQ(FormatAge(59'999), "59s");
  EXPECT_EQ(FormatAge(3 * 60'000), "3m");
  EXPECT_EQ(FormatAge(5 * 3'600'000), "5h");
  EXPECT_EQ(FormatAge(72 * 3'600'000LL), "3d");
}

}  // namespace
}  // namespace ckptfs::tools
