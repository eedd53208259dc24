// Tests of the subcommand flag parser (tools/flags.h).
#include "tools/flags.h"

#include "gtest/gtest.h"

namespace ckptfs::tools {
namespace {

CommandSpec TestSpec() {
  return CommandSpec{"up",
                     "Start things.",
                     "",
                     {{"state-dir", "DIR", "state", "", true},
                      {"servers", "N", "servers", "4"},
                      {"host", "ADDR", "host", "127.0.0.1"},
                      {"lazy", "", "detach lazily"}}};
}

TEST(FlagsTest, AcceptsSpaceAndEqualsForms) {
  auto parsed = ParseFlags(TestSpec(), {"--state-dir", "/a", "--servers=7"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Get("state-dir"), "/a");
  EXPECT_EQ(parsed->Get("servers"), "7");
  EXPECT_TRUE(parsed->Given("servers"));
  EXPECT_FALSE(parsed->Given("host"));
  EXPECT_EQ(parsed->Get("host"), "127.0.0.1");  // default
  EXPECT_FALSE(parsed->GetBool("lazy"));
}

TEST(FlagsTest, ValueMayContainEqualsSign) {
  auto parsed = ParseFlags(TestSpec(), {"--state-dir=/a=b"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->Get("state-dir"), "/a=b");
}

TEST(FlagsTest, BooleanFlags) {
  auto parsed = ParseFlags(TestSpec(), {"--state-dir", "/a", "--lazy"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->GetBool("lazy"));
  parsed = ParseFlags(TestSpec(), {"--state-dir", "/a", "--lazy=false"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->GetBool("lazy"));
  EXPECT_FALSE(ParseFlags(TestSpec(), {"--state-dir", "/a", "--lazy=maybe"}).ok());
}

TEST(FlagsTest, UnknownFlagSuggestsCloseName) {
  auto parsed = ParseFlags(TestSpec(), {"--state-dir", "/a", "--sever", "3"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("unknown flag --sever"), std::string::npos);
  EXPECT_NE(parsed.status().message().find("did you mean --servers?"), std::string::npos);
  parsed = ParseFlags(TestSpec(), {"--completely-different"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message().find("did you mean"), std::string::npos);
}

TEST(FlagsTest, UsageErrors) {
  // Missing value at the end, or followed by another flag.
  EXPECT_FALSE(ParseFlags(TestSpec(), {"--state-dir"}).ok());
  EXPECT_FALSE(ParseFlags(TestSpec(), {"--state-dir", "--servers", "3"}).ok());
  EXPECT_FALSE(ParseFlags(TestSpec(), {"--state-dir="}).ok());
  // Positional argument, single dash, repeated flag, missing required flag.
  EXPECT_FALSE(ParseFlags(TestSpec(), {"--state-dir", "/a", "extra"}).ok());
  EXPECT_FALSE(ParseFlags(TestSpec(), {"-state-dir", "/a"}).ok());
  EXPECT_FALSE(ParseFlags(TestSpec(), {"--state-dir", "/a", "--state-dir", "/b"}).ok());
  auto missing = ParseFlags(TestSpec(), {"--servers", "3"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--state-dir"), std::string::npos);
}

TEST(FlagsTest, HelpSkipsValidation) {
  auto parsed = ParseFlags(TestSpec(), {"--bogus", "--help"});
  EXPECT_FALSE(parsed.ok());  // --bogus comes first
  parsed = ParseFlags(TestSpec(), {"-h"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->help());
}

TEST(FlagsTest, GetIntChecksRange) {
  auto parsed = ParseFlags(TestSpec(), {"--state-dir", "/a", "--servers", "70"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed->GetInt("servers", 1, 100), 70);
  EXPECT_FALSE(parsed->GetInt("servers", 1, 64).ok());
  parsed = ParseFlags(TestSpec(), {"--state-dir", "/a", "--servers", "four"});
  ASSERT_TRUE(parsed.ok());
  auto bad = parsed->GetInt("servers", 1, 64);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--servers"), std::string::npos);
}

TEST(FlagsTest, UsageListsFlagsAndDefaults) {
  const std::string usage = Usage(TestSpec());
  EXPECT_NE(usage.find("usage: ckptfs up --state-dir DIR [--servers N]"), std::string::npos);
  EXPECT_NE(usage.find("(default 4)"), std::string::npos);
  EXPECT_NE(usage.find("[--lazy]"), std::string::npos);
}

TEST(FlagsTest, UnderscoresStandForDashes) {
  auto parsed = ParseFlags(TestSpec(), {"--state_dir", "/a"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Get("state-dir"), "/a");
  EXPECT_FALSE(ParseFlags(TestSpec(), {"--state_dir", "/a", "--state-dir", "/b"}).ok());
}

CommandSpec PositionalSpec() {
  return CommandSpec{"ckpt commit", "Commit.", "", {{"all", "", "everything"}}, {"DIR", "RANK"}};
}

TEST(FlagsTest, PositionalsInOrderAmongFlags) {
  auto parsed = ParseFlags(PositionalSpec(), {"/ckpt", "--all", "-1"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->positionals(), (std::vector<std::string>{"/ckpt", "-1"}));
  EXPECT_TRUE(parsed->GetBool("all"));
  auto missing = ParseFlags(PositionalSpec(), {"/ckpt"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing RANK"), std::string::npos) << missing.status();
  auto extra = ParseFlags(PositionalSpec(), {"/ckpt", "1", "2"});
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("unexpected argument \"2\""), std::string::npos)
      << extra.status();
  EXPECT_NE(Usage(PositionalSpec()).find("usage: ckptfs ckpt commit DIR RANK [--all]"),
            std::string::npos)
      << Usage(PositionalSpec());
}

}  // namespace
}  // namespace ckptfs::tools
