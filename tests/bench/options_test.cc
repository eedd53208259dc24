// Command-line parsing of ckptfs-bench: sizes, defaults, usage errors, and a
// --help that explains every flag.
#include "bench/options.h"

#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

absl::StatusOr<BenchOptions> Parse(std::vector<std::string> args) {
  absl::StatusOr<ParsedCommandLine> parsed = ParseCommandLine(args);
  if (!parsed.ok()) return parsed.status();
  return parsed->options;
}

TEST(ByteSizeTest, SuffixesAndFractions) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("4K"), 4096u);
  EXPECT_EQ(*ParseByteSize("4KiB"), 4096u);
  EXPECT_EQ(*ParseByteSize("64M"), uint64_t{64} << 20);
  EXPECT_EQ(*ParseByteSize("64m"), uint64_t{64} << 20);
  EXPECT_EQ(*ParseByteSize("1.5G"), uint64_t{3} << 29);
  EXPECT_EQ(*ParseByteSize("2T"), uint64_t{2} << 40);
  EXPECT_EQ(*ParseByteSize("512B"), 512u);
  EXPECT_FALSE(ParseByteSize("0").ok());
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("abc").ok());
  EXPECT_FALSE(ParseByteSize("1.5").ok());
  EXPECT_FALSE(ParseByteSize("-1M").ok());
  EXPECT_FALSE(ParseByteSize("99999999999T").ok());
}

TEST(PhasesTest, AnyOrderRunsInPhaseOrder) {
  auto phases = ParsePhases("bcast,save");
  ASSERT_TRUE(phases.ok());
  EXPECT_EQ(*phases, (std::vector<Phase>{Phase::kSave, Phase::kBcast}));
  EXPECT_FALSE(ParsePhases("save,save").ok());
  EXPECT_FALSE(ParsePhases("save,flush").ok());
  EXPECT_FALSE(ParsePhases("").ok());
}

TEST(CommandLineTest, Defaults) {
  auto o = Parse({"--dir", "/tmp"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->dir, "/tmp");
  EXPECT_FALSE(o->native);
  EXPECT_EQ(o->spec.kind, WorkloadKind::kRaw);
  EXPECT_EQ(o->spec.ranks, 8);
  EXPECT_EQ(o->spec.bytes_per_rank, uint64_t{64} << 20);
  EXPECT_EQ(o->spec.io_size, 1u << 20);
  EXPECT_EQ(o->repeat, 3);
  EXPECT_EQ(o->commit, CommitMode::kAuto);
  EXPECT_EQ(o->phases.size(), 4u);
  EXPECT_TRUE(o->baseline_dir.empty());
  EXPECT_FALSE(o->target_procs_given);
  EXPECT_EQ(o->disk, "");  // the runner picks the baseline's device
}

TEST(CommandLineTest, EveryFlag) {
  auto o = Parse({"--dir=/a",
                  "--baseline",
                  "/b",
                  "--workload",
                  "dcp",
                  "--ranks",
                  "16",
                  "--size",
                  "3M",
                  "--io-size",
                  "256K",
                  "--tensor-size",
                  "2M",
                  "--phases",
                  "save,load",
                  "--repeat",
                  "5",
                  "--commit",
                  "off",
                  "--target-procs",
                  "ckptfs-fuse, 42",
                  "--json",
                  "o.json",
                  "--plot",
                  "o.svg",
                  "--progress",
                  "off",
                  "--seed",
                  "7",
                  "--max-write",
                  "1M",
                  "--phase-timeout",
                  "30",
                  "--commit-timeout",
                  "20",
                  "--disk",
                  "nvme0n1"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->baseline_dir, "/b");
  EXPECT_EQ(o->spec.kind, WorkloadKind::kDcp);
  EXPECT_EQ(o->spec.ranks, 16);
  EXPECT_EQ(o->spec.bytes_per_rank, uint64_t{3} << 20);
  EXPECT_EQ(o->spec.io_size, 256u << 10);
  EXPECT_EQ(o->spec.tensor_bytes, uint64_t{2} << 20);
  EXPECT_EQ(o->spec.seed, 7u);
  EXPECT_EQ(o->spec.max_write_bytes, uint64_t{1} << 20);
  EXPECT_EQ(o->phase_timeout_s, 30);
  EXPECT_EQ(o->commit_timeout_s, 20);
  EXPECT_EQ(o->repeat, 5);
  EXPECT_EQ(o->commit, CommitMode::kOff);
  EXPECT_EQ(o->progress, ProgressMode::kOff);
  EXPECT_EQ(o->target_procs, (std::vector<std::string>{"ckptfs-fuse", "42"}));
  EXPECT_TRUE(o->target_procs_given);
  EXPECT_EQ(o->json_path, "o.json");
  EXPECT_EQ(o->plot_path, "o.svg");
  EXPECT_EQ(o->disk, "nvme0n1");
}

TEST(CommandLineTest, Native) {
  auto o = Parse({"--native", "--meta", "127.0.0.1:7000", "--ranks", "4096", "--threads", "8"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->native);
  EXPECT_EQ(o->dir, "/");
  EXPECT_EQ(o->threads, 8);
  EXPECT_EQ(o->spec.ranks, 4096);
}

TEST(CommandLineTest, Preset) {
  auto o = Parse({"--dir", "/x", "--preset", "llama3-8b", "--scale", "0.001"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->spec.ranks, 8);
  EXPECT_NEAR(static_cast<double>(o->spec.bytes_per_rank) * 8, 105e6, 105e6 * 0.01);
}

TEST(CommandLineTest, UsageErrorsSayWhat) {
  auto expect_error = [](std::vector<std::string> args, const std::string& words) {
    auto o = Parse(args);
    ASSERT_FALSE(o.ok());
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(o.status().message()).find(words), std::string::npos)
        << o.status().message();
  };
  expect_error({}, "--dir");
  expect_error({"--native"}, "--meta");
  expect_error({"--dir", "/x", "--meta", "h:1"}, "--native");
  expect_error({"--dir", "/x", "--workload", "zip"}, "--workload");
  expect_error({"--dir", "/x", "--ranks", "0"}, "--ranks");
  expect_error({"--dir", "/x", "--size", "lots"}, "--size");
  expect_error({"--dir", "/x", "--phases", "save,nap"}, "nap");
  expect_error({"--dir", "/x", "--commit", "maybe"}, "--commit");
  expect_error({"--dir", "/x", "--repeat", "0"}, "--repeat");
  expect_error({"--dir", "/x", "--preset", "llama3-8b", "--ranks", "4"}, "--preset");
  expect_error({"--dir", "/x", "--scale", "0.5"}, "--scale");
  expect_error({"--dir", "/x", "--preset", "llama3-8b", "--scale", "2"}, "--scale");
  expect_error({"--dir", "/x", "--bogus"}, "--bogus");
  expect_error({"--dir", "/x", "--disk", "/dev/vda"}, "--disk");
  expect_error({"--dir", "/x", "--disk", ""}, "--disk");
  expect_error({"--dir", "/x", "--disk", ".."}, "--disk");
}

TEST(CommandLineTest, HelpExplainsEveryFlagWithExamples) {
  auto parsed = ParseCommandLine({"--help"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->help);
  const std::string help = HelpText();
  for (const char* flag :
       {"--dir",       "--native", "--meta",           "--baseline",      "--threads",
        "--workload",  "--ranks",  "--size",           "--io-size",       "--tensor-size",
        "--max-write", "--preset", "--scale",          "--seed",          "--phases",
        "--repeat",    "--commit", "--commit-timeout", "--phase-timeout", "--target-procs",
        "--progress",  "--json",   "--plot",           "--disk"}) {
    EXPECT_NE(help.find(std::string("\n  ") + flag + " "), std::string::npos) << flag;
  }
  EXPECT_NE(help.find("Examples:"), std::string::npos);
  EXPECT_NE(help.find("ckptfs-bench --dir"), std::string::npos);
}

}  // namespace
}  // namespace ckptfs::bench
