// ckptfs-bench against a real ckptfs cluster: through the FUSE mount (--dir,
// ranks are processes) and through libckptfs (--native, ranks are threads);
// and bench/torch_storm.py (real torch.save / torch.load storms) on
// the mount with the build's Python environment (torch 2.13), on the CPU.
// Every byte loaded is verified by the tool; the commit phase runs when the
// mount's barrier answers. `--commit auto` may only decide "off" on ckptfs
// when the barrier is missing (ENOTSUP/EOPNOTSUPP/ENODATA); the test prints
// which happened.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

constexpr char kPython[] = "/usr/bin/python3";  // the standard library is enough
#ifndef CKPTFS_PYTHON
#error "CKPTFS_PYTHON (the build's Python with torch) must be defined by the build"
#endif
constexpr char kTorchPython[] = CKPTFS_PYTHON;

// Prints the facts the tests check from a --json report, one per line.
constexpr char kSummarize[] = R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
t = d["targets"][0]
phases = d["phases"]
def count(name): return len([p for p in phases if p["phase"] == name])
print("fs_type=" + t["fs_type"])
print("commit=" + str(t["commit"]))
print("note=" + t["commit_note"])
print("saves=%d commits=%d loads=%d bcasts=%d" % (count("save"), count("commit"), count("load"), count("bcast")))
print("verified=%d" % sum(p["figures"].get("verified_bytes", 0) for p in phases))
c = [p["figures"] for p in phases if p["phase"] == "commit"]
print("commit_figures=" + ("yes" if c and all("commit_p50_s" in f and "commit_max_s" in f for f in c) else "no"))
s = [p["figures"] for p in phases if p["phase"] == "save"]
print("save_gbps=" + ("yes" if s and all(f.get("agg_gbps", 0) > 0 for f in s) else "no"))
)PY";

class BenchTest : public MountedClusterTest {
 protected:
  // Runs ckptfs-bench with `args` and a JSON report; returns the report's
  // facts (kSummarize's output) or fails.
  std::string RunBench(const std::string& args, int repeats) {
    const std::string json = absl::StrCat(cluster().root(), "/", Name(), ".json");
    std::string output;
    const int rc = RunShell(absl::StrCat(CKPTFS_BENCH_PATH, " ", args, " --repeat ", repeats,
                                         " --json ", json, " --progress off --commit-timeout 120"),
                            &output);
    EXPECT_EQ(rc, 0) << output << "\n" << cluster().DescribeLogs();
    std::cout << output;
    return Facts("summarize.py", kSummarize, json);
  }

  // Runs the Python `script` (saved as `name` in the cluster's root) on the
  // JSON report `json` and returns what it prints; a failure of the script
  // fails the test.
  std::string Facts(const char* name, const char* script, const std::string& json) {
    const std::string path = absl::StrCat(cluster().root(), "/", name);
    EXPECT_TRUE(WriteWholeFile(path, script).ok());
    std::string facts;
    EXPECT_EQ(RunShell(absl::StrCat(kPython, " ", path, " ", json), &facts), 0) << facts;
    return facts;
  }

  static std::string Name() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  // The commit phase ran in every repeat, or the barrier is missing and
  // auto said so with the errno. Records which.
  void CheckCommit(const std::string& facts, int repeats) {
    if (absl::StrContains(facts, "commit=True")) {
      EXPECT_TRUE(absl::StrContains(facts, absl::StrCat("commits=", repeats, " "))) << facts;
      EXPECT_TRUE(absl::StrContains(facts, "commit_figures=yes")) << facts;
      EXPECT_TRUE(absl::StrContains(facts, "barrier answered")) << facts;
      ::testing::Test::RecordProperty("commit", "barrier ran");
      std::cout << "[bench] commit barrier ran\n";
    } else {
      const bool missing = absl::StrContains(facts, "ENOTSUP") ||
                           absl::StrContains(facts, "EOPNOTSUPP") ||
                           absl::StrContains(facts, "ENODATA");
      EXPECT_TRUE(missing) << "commit off on ckptfs for another reason:\n" << facts;
      EXPECT_TRUE(absl::StrContains(facts, "commits=0 ")) << facts;
      ::testing::Test::RecordProperty("commit", "barrier missing");
      std::cout << "[bench] commit barrier missing: " << facts;
    }
  }
};

TEST_F(BenchTest, DirStormOnTheMount) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << "no " << kPython;
  constexpr int kRanks = 4, kRepeats = 2;
  const std::string facts =
      RunBench(absl::StrCat("--dir ", TestDir(), " --ranks ", kRanks, " --size 3M"), kRepeats);
  EXPECT_TRUE(absl::StrContains(facts, "fs_type=fuse.ckptfs")) << facts;
  EXPECT_TRUE(absl::StrContains(facts, "saves=2 ")) << facts;
  EXPECT_TRUE(absl::StrContains(facts, "loads=2 bcasts=2")) << facts;
  // load and bcast each read every rank's 3 MiB, twice.
  EXPECT_TRUE(absl::StrContains(facts, absl::StrCat("verified=", 2 * 2 * kRanks * (3 << 20))))
      << facts;
  EXPECT_TRUE(absl::StrContains(facts, "save_gbps=yes")) << facts;
  CheckCommit(facts, kRepeats);
  // Every step directory (committed checkpoints included) was removed.
  std::string listing;
  EXPECT_EQ(RunShell(absl::StrCat("ls -A ", TestDir()), &listing), 0);
  EXPECT_EQ(listing, "") << listing;
}

TEST_F(BenchTest, DcpStormOnTheMount) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << "no " << kPython;
  const std::string facts = RunBench(
      absl::StrCat("--dir ", TestDir(), " --workload dcp --ranks 3 --size 2M --tensor-size 512K"),
      1);
  EXPECT_TRUE(absl::StrContains(facts, "saves=1 ")) << facts;
  CheckCommit(facts, 1);
}

TEST_F(BenchTest, NativeStorm) {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << "no " << kPython;
  constexpr int kRanks = 64, kRepeats = 2;
  const std::string facts =
      RunBench(absl::StrCat("--native --meta ", cluster().meta_address(), " --dir /", Name(),
                            " --ranks ", kRanks, " --size 256K --io-size 64K --threads 8"),
               kRepeats);
  EXPECT_TRUE(absl::StrContains(facts, "fs_type=ckptfs (libckptfs)")) << facts;
  EXPECT_TRUE(absl::StrContains(facts, absl::StrCat("verified=", 2 * 2 * kRanks * (256 << 10))))
      << facts;
  EXPECT_TRUE(absl::StrContains(facts, "save_gbps=yes")) << facts;
  CheckCommit(facts, kRepeats);
}

// A plain directory beside the mount as baseline: both targets run, and the
// summary puts the ratio first.
TEST_F(BenchTest, MountAgainstPlainDirectory) {
  const std::string plain = absl::StrCat(cluster().root(), "/plain");
  ASSERT_EQ(::mkdir(plain.c_str(), 0755), 0);
  std::string output;
  const int rc = RunShell(absl::StrCat(CKPTFS_BENCH_PATH, " --dir ", TestDir(), " --baseline ",
                                       plain, " --ranks 2 --size 2M --repeat 2 --progress off"),
                          &output);
  ASSERT_EQ(rc, 0) << output << "\n" << cluster().DescribeLogs();
  EXPECT_TRUE(absl::StrContains(output, "A/B (median of ratios)")) << output;
  EXPECT_TRUE(absl::StrContains(output, "fuse.ckptfs")) << output;
  // The baseline's disk is reported on when it has one (not on tmpfs or
  // overlay): its busy time, and what it wrote during the saves.
  struct stat st {};
  ASSERT_EQ(::stat(plain.c_str(), &st), 0);
  const std::string uevent =
      absl::StrCat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev), "/uevent");
  if (absl::StrContains(output, "is not in /proc/diskstats: no disk figures")) {
    std::cout << "[bench] the baseline's disk is not in /proc/diskstats here\n";
  } else if (major(st.st_dev) != 0 && ::access(uevent.c_str(), R_OK) == 0) {
    EXPECT_TRUE(absl::StrContains(output, "holds B's directory")) << output;
    EXPECT_TRUE(absl::StrContains(output, "disk busy %")) << output;
    EXPECT_TRUE(absl::StrContains(output, "disk write GB/s")) << output;
  } else {
    std::cout << "[bench] " << plain << " is not on a block device: no disk figures\n";
  }
  std::cout << output;
}

// Prints the facts TorchStormOnTheMount checks from torch_storm.py's JSON.
constexpr char kStormFacts[] = R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["phase"]: r for r in d["summary"]}
print("phases=" + ",".join(sorted(rows)))
for name in ("save", "load"):
    r = rows.get(name, {})
    a, b = r.get("A", {}), r.get("B", {})
    print("%s: a_gbps=%s b_gbps=%s ratio=%s daemon_cpu=%s" % (
        name, a.get("gbps", 0) > 0, b.get("gbps", 0) > 0, r.get("ratio") is not None,
        "daemon_cpu_s_per_gib" in a and "daemon_cpu_s_per_gib" not in b))
print("device=" + d["device"])
)PY";

// Real torch.save and torch.load storms from 2 rank processes into the mount
// and a plain directory: every rank's tensors load back equal (the script
// fails otherwise), both targets are measured, and the ckptfs daemons' CPU
// is counted on the mount only.
TEST_F(BenchTest, TorchStormOnTheMount) {
  std::string probe;
  ASSERT_EQ(RunShell(absl::StrCat(kTorchPython, " -c 'import torch'"), &probe), 0)
      << kTorchPython << " cannot import torch; run scripts/install-python.sh test: " << probe;
  const std::string plain = absl::StrCat(cluster().root(), "/plain");
  const std::string json = absl::StrCat(cluster().root(), "/storm.json");
  std::string output;
  const int rc = RunShell(absl::StrCat(kTorchPython, " ", CKPTFS_TORCH_STORM, " --dir ", TestDir(),
                                       " --baseline ", plain, " --ranks 2 --size 6M --tensors 3",
                                       " --repeat 2 --phases load,save --device cpu --json ", json),
                          &output);
  ASSERT_EQ(rc, 0) << output << "\n" << cluster().DescribeLogs();
  std::cout << output;
  const std::string facts = Facts("storm_facts.py", kStormFacts, json);
  EXPECT_TRUE(absl::StrContains(facts, "phases=load,save\n")) << facts;
  for (const char* phase : {"save", "load"}) {
    EXPECT_TRUE(absl::StrContains(
        facts, absl::StrCat(phase, ": a_gbps=True b_gbps=True ratio=True daemon_cpu=True")))
        << facts;
  }
  EXPECT_TRUE(absl::StrContains(facts, "device=cpu")) << facts;
  // The step directories are gone from both targets.
  std::string left;
  RunShell(absl::StrCat("ls -A ", TestDir(), " ", plain), &left);
  EXPECT_FALSE(absl::StrContains(left, "step_")) << left;
}

}  // namespace
}  // namespace ckptfs::testing
