// ckptfs-bench run as a program, against temporary directories: a full
// small storm with a baseline (summary, JSON, SVG, nothing left behind),
// every workload, clear errors for a missing directory, a file given as a
// directory, a full disk, --commit on without a barrier, and a rank that
// dies mid-save (reported by rank and cause; the run ends, nothing hangs).
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

namespace fs = std::filesystem;
constexpr char kPython[] = "/usr/bin/python3";

struct Outcome {
  int exit_code = -1;  // -signal if killed
  std::string out, err;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class BenchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/bench_cli.XXXXXX");
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    fs::create_directory(a());
    fs::create_directory(b());
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string a() const { return root_ + "/a"; }
  std::string b() const { return root_ + "/b"; }

  // Runs ckptfs-bench with `args`, `env` added ("NAME=value").
  Outcome Run(std::vector<std::string> args, std::vector<std::string> env = {}) {
    const std::string out_path = root_ + "/stdout", err_path = root_ + "/stderr";
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(err, 2);
      for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(CKPTFS_BENCH_PATH));
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    Outcome outcome;
    int status = 0;
    ::waitpid(pid, &status, 0);
    outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    outcome.out = ReadAll(out_path);
    outcome.err = ReadAll(err_path);
    return outcome;
  }

  static size_t Entries(const std::string& dir) {
    size_t n = 0;
    for (auto it = fs::directory_iterator(dir); it != fs::directory_iterator(); ++it) ++n;
    return n;
  }

  std::string root_;
};

TEST_F(BenchCliTest, HelpAndUsageErrors) {
  Outcome help = Run({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(help.out, "--baseline")) << help.out;
  Outcome usage = Run({"--dir", a(), "--ranks", "zero"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(usage.err, "--ranks")) << usage.err;
}

TEST_F(BenchCliTest, MissingDirectoryIsAClearError) {
  const std::string missing = root_ + "/no/such/dir";
  Outcome o = Run({"--dir", missing, "--progress", "off"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(o.err, missing + " does not exist")) << o.err;
  Outcome baseline = Run({"--dir", a(), "--baseline", missing, "--progress", "off"});
  EXPECT_EQ(baseline.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(baseline.err, "baseline B")) << baseline.err;
  EXPECT_TRUE(absl::StrContains(baseline.err, "does not exist")) << baseline.err;
}

TEST_F(BenchCliTest, UnknownDiskIsAClearErrorAndNoneTurnsDiskFiguresOff) {
  Outcome o = Run({"--dir", a(), "--disk", "no-such-disk0", "--progress", "off"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(o.err, "--disk no-such-disk0: /proc/diskstats lists no such"))
      << o.err;
  EXPECT_EQ(Entries(a()), 0u);
  Outcome off = Run({"--dir", a(), "--baseline", b(), "--disk", "none", "--ranks", "2", "--size",
                     "1M", "--repeat", "1", "--phases", "save", "--progress", "off"});
  ASSERT_EQ(off.exit_code, 0) << off.out << off.err;
  EXPECT_FALSE(absl::StrContains(off.out, "disk busy")) << off.out;
  EXPECT_FALSE(absl::StrContains(off.out, "  disk: ")) << off.out;
}

TEST_F(BenchCliTest, FileIsNotADirectory) {
  const std::string file = root_ + "/file";
  std::ofstream(file) << "x";
  Outcome o = Run({"--dir", file, "--progress", "off"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(o.err, "is not a directory")) << o.err;
}

TEST_F(BenchCliTest, SmallStormWithBaseline) {
  const std::string json = root_ + "/out.json", svg = root_ + "/out.svg";
  Outcome o = Run({"--dir", a(), "--baseline", b(), "--ranks", "3", "--size", "3M", "--io-size",
                   "512K", "--repeat", "2", "--json", json, "--plot", svg, "--progress", "off"});
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  // The summary: ratios first, every phase but commit (a plain directory).
  EXPECT_TRUE(absl::StrContains(o.out, "A/B (median of ratios)")) << o.out;
  for (const char* row :
       {"aggregate GB/s", "MLPerf throughput GB/s", "rank time p99 s", "time to first byte p50 s",
        "bytes verified", "rank CPU s/GiB", "rank kernel CPU s/GiB"}) {
    EXPECT_TRUE(absl::StrContains(o.out, row)) << row << "\n" << o.out;
  }
  EXPECT_TRUE(absl::StrContains(o.out, "is not ckptfs")) << o.out;
  // Nothing is left in the targets.
  EXPECT_EQ(Entries(a()), 0u);
  EXPECT_EQ(Entries(b()), 0u);
  // The plot has a timeline per rank.
  const std::string picture = ReadAll(svg);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(absl::StrContains(picture, absl::StrCat("id=\"rank-", rank, "\""))) << rank;
  }
  if (::access(kPython, X_OK) != 0) return;
  const std::string check = absl::StrCat(
      kPython,
      " -c 'import json,sys; d=json.load(open(sys.argv[1]));"
      " p=d[\"phases\"]; assert len(p)==12, len(p);"
      " assert sorted(set((x[\"target\"],x[\"phase\"]) for x in p))=="
      "[(t,ph) for t in \"AB\" for ph in (\"bcast\",\"load\",\"save\")];"
      " l=[x for x in p if x[\"phase\"]==\"load\"];"
      " assert all(x[\"figures\"][\"verified_bytes\"]==3*3*1048576 for x in l), l;"
      " r=[s for s in d[\"summary\"] if s[\"figure\"]==\"agg_gbps\" and s[\"phase\"]==\"save\"][0];"
      " assert r[\"ratio_median\"] > 0 and len(r[\"a\"])==2 and len(r[\"b\"])==2;"
      " assert d[\"targets\"][0][\"commit\"] is False' ",
      json);
  EXPECT_EQ(std::system(check.c_str()), 0) << ReadAll(json);
}

TEST_F(BenchCliTest, EveryWorkloadRuns) {
  for (const char* workload : {"torch", "dcp"}) {
    Outcome o = Run({"--dir", a(), "--workload", workload, "--ranks", "2", "--size", "2M",
                     "--tensor-size", "512K", "--repeat", "1", "--progress", "off"});
    EXPECT_EQ(o.exit_code, 0) << workload << "\n" << o.out << o.err;
    EXPECT_TRUE(absl::StrContains(o.out, "bytes verified")) << o.out;
    EXPECT_EQ(Entries(a()), 0u) << workload;
  }
}

TEST_F(BenchCliTest, CommitOnWithoutABarrierFails) {
  Outcome o = Run({"--dir", a(), "--commit", "on", "--ranks", "2", "--size", "1M", "--repeat", "1",
                   "--progress", "off"});
  EXPECT_EQ(o.exit_code, 1) << o.out;
  EXPECT_TRUE(absl::StrContains(o.err, "no commit barrier")) << o.err;
  EXPECT_EQ(Entries(a()), 0u);
}

TEST_F(BenchCliTest, DyingRankIsReportedAndTheRunEnds) {
  Outcome exited =
      Run({"--dir", a(), "--ranks", "4", "--size", "8M", "--repeat", "2", "--progress", "off"},
          {"CKPTFS_BENCH_TEST_DIE_RANK=2"});
  EXPECT_EQ(exited.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(exited.err, "rank 2 died: exited with status 41")) << exited.err;
  EXPECT_TRUE(absl::StrContains(exited.err, "save, repeat 1")) << exited.err;
  EXPECT_EQ(Entries(a()), 0u);

  Outcome killed = Run({"--dir", a(), "--ranks", "4", "--size", "8M", "--progress", "off"},
                       {"CKPTFS_BENCH_TEST_DIE_RANK=0:signal"});
  EXPECT_EQ(killed.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(killed.err, "rank 0 died: killed by signal 9")) << killed.err;
}

// A rank that never ends is killed after --phase-timeout and named.
TEST_F(BenchCliTest, StuckRankIsNamedAfterThePhaseTimeout) {
  Outcome o = Run(
      {"--dir", a(), "--ranks", "4", "--size", "4M", "--phase-timeout", "2", "--progress", "off"},
      {"CKPTFS_BENCH_TEST_DIE_RANK=3:hang"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(o.err, "rank 3 (1 of 4) still running after 2 s")) << o.err;
  EXPECT_EQ(Entries(a()), 0u);
}

// A 4 MiB tmpfs cannot hold 4 x 2 MiB: the error calls the target full.
TEST_F(BenchCliTest, FullDiskNamesTheTarget) {
  const std::string small = root_ + "/small";
  fs::create_directory(small);
  if (::geteuid() != 0 || ::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "needs root to mount a small tmpfs";
  }
  Outcome o =
      Run({"--dir", small, "--ranks", "4", "--size", "2M", "--repeat", "1", "--progress", "off"});
  ::umount2(small.c_str(), MNT_DETACH);
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(o.err, "target A (" + small + ") is full (ENOSPC)")) << o.err;
}

}  // namespace
}  // namespace ckptfs::bench
