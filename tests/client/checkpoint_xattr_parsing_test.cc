// The checkpoint xattr values (client/checkpoint_xattr_parsing.h): what parses,
// what is EINVAL, and the info line's format, which tools parse back.
#include "client/checkpoint_xattr_parsing.h"

#include <cerrno>
#include <string>

#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs::client {
namespace {

TEST(CheckpointXattrParsingTest, RanksParse) {
  EXPECT_EQ(*ParseCheckpointRanks("1"), 1u);
  EXPECT_EQ(*ParseCheckpointRanks("8\n"), 8u);  // what `echo 8` writes
  EXPECT_EQ(*ParseCheckpointRanks("1048576"), 1048576u);
  EXPECT_EQ(*ParseCheckpointRanks("0064"), 64u);
}

TEST(CheckpointXattrParsingTest, BadRanksAreEinval) {
  for (const char* bad : {"0", "-1", "abc", "8x", "", "\n", " 8", "8 ", "+8", "8\n\n", "1048577",
                          "99999999999999999999", "4294967297", "0x10", "1.5"}) {
    absl::StatusOr<uint32_t> ranks = ParseCheckpointRanks(bad);
    ASSERT_FALSE(ranks.ok()) << "\"" << bad << "\" parsed as " << *ranks;
    EXPECT_EQ(ErrnoFromStatus(ranks.status()), EINVAL) << bad;
  }
}

TEST(CheckpointXattrParsingTest, RankParse) {
  EXPECT_EQ(*ParseCheckpointRank("0"), 0u);
  EXPECT_EQ(*ParseCheckpointRank("7\n"), 7u);
  EXPECT_EQ(*ParseCheckpointRank("4294967295"), 4294967295u);
  for (const char* bad : {"-1", "abc", "8x", "", "4294967296", " 1"}) {
    absl::StatusOr<uint32_t> rank = ParseCheckpointRank(bad);
    ASSERT_FALSE(rank.ok()) << bad;
    EXPECT_EQ(ErrnoFromStatus(rank.status()), EINVAL) << bad;
  }
}

TEST(CheckpointXattrParsingTest, CommitRankNameParse) {
  EXPECT_EQ(*ParseCommitRankXattr("user.ckptfs.commit.0"), 0u);
  EXPECT_EQ(*ParseCommitRankXattr("user.ckptfs.commit.4095"), 4095u);
  for (const char* bad : {"user.ckptfs.commit.", "user.ckptfs.commit.x", "user.ckptfs.commit.-1",
                          "user.ckptfs.commit.1\n", "user.ckptfs.commit", "user.other.1"}) {
    EXPECT_EQ(ErrnoFromStatus(ParseCommitRankXattr(bad).status()), EINVAL) << bad;
  }
}

TEST(CheckpointXattrParsingTest, NameParse) {
  EXPECT_EQ(*ParseCheckpointName("step-100\n"), "step-100");
  EXPECT_EQ(*ParseCheckpointName("with space"), "with space");
  for (const char* bad : {"", "\n", ".", "..", "a/b"}) {
    EXPECT_EQ(ErrnoFromStatus(ParseCheckpointName(bad).status()), EINVAL) << bad;
  }
}

TEST(CheckpointXattrParsingTest, ClassifiesOnlyCheckpointNames) {
  EXPECT_EQ(ClassifyCheckpointXattr("user.ckptfs.ranks"), CheckpointXattr::kRanks);
  EXPECT_EQ(ClassifyCheckpointXattr("user.ckptfs.commit"), CheckpointXattr::kCommit);
  EXPECT_EQ(ClassifyCheckpointXattr("user.ckptfs.commit.12"), CheckpointXattr::kCommitRank);
  EXPECT_EQ(ClassifyCheckpointXattr("user.ckptfs.remove"), CheckpointXattr::kRemove);
  EXPECT_EQ(ClassifyCheckpointXattr("user.ckptfs.state"), CheckpointXattr::kState);
  EXPECT_EQ(ClassifyCheckpointXattr("user.ckptfs.info"), CheckpointXattr::kInfo);
  EXPECT_EQ(ClassifyCheckpointXattr("user.ckptfs.checkpoints"), CheckpointXattr::kCheckpoints);
  EXPECT_EQ(ClassifyCheckpointXattr("user.ckptfs.latest"), CheckpointXattr::kLatest);
  for (const char* stored : {"user.ckptfs.keep", "user.ckptfs.chunk_size",
                             "user.ckptfs.commit_timeout_s", "user.ckptfs.ranksx", "user.a"}) {
    EXPECT_EQ(ClassifyCheckpointXattr(stored), CheckpointXattr::kNone) << stored;
  }
}

meta::CheckpointInfo SampleInfo() {
  meta::CheckpointInfo info;
  info.set_ino(42);
  info.set_name("step 7=x");
  info.set_state(meta::ABORTED);
  info.set_ranks(8);
  info.set_arrived(7);
  info.set_files(3);
  info.set_bytes(12345678901);
  info.set_declared_ms(1700000000000);
  info.set_first_commit_ms(1700000000100);
  info.set_ended_ms(1700000000700);
  info.set_timeout_s(600);
  info.set_abort_errno(EBUSY);
  info.set_abort_reason("rank0/model.pt is still open\nfor writing");
  return info;
}

TEST(CheckpointXattrParsingTest, InfoLineFormat) {
  EXPECT_EQ(FormatCheckpointInfo(SampleInfo()),
            "name=step\\0407\\075x state=aborted ranks=8 arrived=7 files=3 bytes=12345678901 "
            "declared_ms=1700000000000 first_commit_ms=1700000000100 "
            "ended_ms=1700000000700 timeout_s=600 errno=16 ino=42 "
            "reason=rank0/model.pt is still open for writing");
}

TEST(CheckpointXattrParsingTest, RemovalValueRoundTrips) {
  absl::StatusOr<CheckpointRemoval> removal =
      ParseCheckpointRemoval(CheckpointRemovalValue("step 7", 42, meta::ABORTED));
  ASSERT_TRUE(removal.ok()) << removal.status();
  EXPECT_EQ(removal->name, "step 7");
  EXPECT_EQ(removal->expected_ino, 42u);
  EXPECT_EQ(removal->expected_state, meta::ABORTED);
  removal = ParseCheckpointRemoval("step\n");
  ASSERT_TRUE(removal.ok()) << removal.status();
  EXPECT_EQ(removal->name, "step");
  EXPECT_EQ(removal->expected_ino, 0u);
}

TEST(CheckpointXattrParsingTest, InfoLineRoundTrips) {
  const meta::CheckpointInfo info = SampleInfo();
  absl::StatusOr<meta::CheckpointInfo> parsed = ParseCheckpointInfo(FormatCheckpointInfo(info));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->name(), info.name());
  EXPECT_EQ(parsed->state(), info.state());
  EXPECT_EQ(parsed->arrived(), 7u);
  EXPECT_EQ(parsed->bytes(), info.bytes());
  EXPECT_EQ(parsed->ended_ms(), info.ended_ms());
  EXPECT_EQ(parsed->abort_errno(), EBUSY);
  EXPECT_EQ(parsed->ino(), 42u);
  EXPECT_EQ(parsed->abort_reason(), "rank0/model.pt is still open for writing");
  EXPECT_FALSE(ParseCheckpointInfo("name=a state=b").ok());
  EXPECT_FALSE(ParseCheckpointInfo("").ok());
}

TEST(CheckpointXattrParsingTest, ListIsOneLinePerCheckpointByName) {
  meta::ListCheckpointsReply reply;
  meta::CheckpointInfo b = SampleInfo();
  b.set_name("b");
  b.set_state(meta::COMMITTED);
  b.set_abort_reason("");
  meta::CheckpointInfo a = b;
  a.set_name("a");
  a.set_state(meta::PENDING);
  *reply.add_checkpoints() = b;
  *reply.add_checkpoints() = a;
  const std::string list = FormatCheckpointList(reply);
  EXPECT_EQ(list, FormatCheckpointInfo(a) + "\n" + FormatCheckpointInfo(b) + "\n");
  EXPECT_EQ(FormatCheckpointList(meta::ListCheckpointsReply()), "");
}

TEST(CheckpointXattrParsingTest, StateNames) {
  EXPECT_EQ(CheckpointStateName(meta::PENDING), "pending");
  EXPECT_EQ(CheckpointStateName(meta::COMMITTED), "committed");
  EXPECT_EQ(CheckpointStateName(meta::ABORTED), "aborted");
  EXPECT_EQ(CheckpointStateName(meta::REMOVING), "removing");
  EXPECT_EQ(CheckpointStateName(meta::CHECKPOINT_STATE_UNSPECIFIED), "");
}

TEST(CheckpointXattrParsingTest, ARemovingCheckpointsLineSaysSinceWhen) {
  meta::CheckpointInfo info = SampleInfo();
  info.set_state(meta::REMOVING);
  info.set_abort_errno(0);
  info.set_abort_reason("");
  info.set_removing_ms(1700000001000);
  const std::string line = FormatCheckpointInfo(info);
  EXPECT_NE(line.find(" state=removing "), std::string::npos) << line;
  EXPECT_NE(line.find(" ino=42 removing_ms=1700000001000 reason="), std::string::npos) << line;
  absl::StatusOr<meta::CheckpointInfo> parsed = ParseCheckpointInfo(line);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->state(), meta::REMOVING);
  EXPECT_EQ(parsed->removing_ms(), 1700000001000);
  absl::StatusOr<CheckpointRemoval> removal =
      ParseCheckpointRemoval(CheckpointRemovalValue("step", 42, meta::REMOVING));
  ASSERT_TRUE(removal.ok()) << removal.status();
  EXPECT_EQ(removal->expected_state, meta::REMOVING);
}

}  // namespace
}  // namespace ckptfs::client
