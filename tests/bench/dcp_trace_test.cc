// The exact system calls of the dcp and torch save patterns, watched with
// strace on ckptfs_bench_workload_trace (PosixRankIo on a temp directory).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/workload.h"
#include "gtest/gtest.h"
#include "tests/bench/rank_io_testing.h"

namespace ckptfs::bench {
namespace {

using ::ckptfs::bench::testing::ReadWholeFile;
using ::ckptfs::bench::testing::TempDir;

constexpr char kStrace[] = "/usr/bin/strace";
constexpr char kTraced[] =
    "openat,write,writev,pwrite64,fsync,fdatasync,close,rename,renameat,renameat2,unlink,"
    "unlinkat,mkdir,mkdirat";

struct Event {
  std::string call;                // "write"
  std::vector<std::string> files;  // names relative to the step directory
  std::string result;              // "320", "0", "-1 ENOENT"
  std::string ToString() const {
    return absl::StrCat(call, " ", absl::StrJoin(files, " "), " = ", result);
  }
};

// Runs the trace helper under strace and returns the calls that touch `step`.
class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kStrace, X_OK) != 0) GTEST_SKIP() << kStrace << " is not installed";
    ASSERT_FALSE(dir_.path().empty());
  }

  std::vector<Event> Trace(const std::string& kind, int ranks, uint64_t bytes_per_rank,
                           uint64_t tensor_bytes) {
    const std::string log = dir_.path() + "/strace.log";
    const std::string command =
        absl::StrCat(kStrace, " -f -y -s 0 -e trace=", kTraced, " -o ", log, " ",
                     CKPTFS_BENCH_TRACE_PATH, " save ", kind, " ", dir_.path(), " step ", ranks,
                     " ", bytes_per_rank, " ", tensor_bytes, " 2>&1");
    FILE* pipe = ::popen(command.c_str(), "r");
    std::string output;
    char buf[4096];
    size_t n;
    while (pipe != nullptr && (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0)
      output.append(buf, n);
    const int status = pipe != nullptr ? ::pclose(pipe) : -1;
    if (output.find("ptrace") != std::string::npos) {
      skipped_ = true;
      return {};
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
    return Parse(ReadWholeFile(log));
  }

  std::vector<Event> Parse(const std::string& log) {
    const std::string step = dir_.path() + "/step";
    std::vector<Event> events;
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      if (line.find(dir_.path()) == absl::string_view::npos) continue;
      const size_t space = line.find(' ');
      const size_t paren = line.find('(');
      if (space == absl::string_view::npos || paren == absl::string_view::npos) continue;
      Event event;
      // strace pads the pid ("817   mkdir(" for a short pid).
      event.call =
          std::string(absl::StripAsciiWhitespace(line.substr(space + 1, paren - space - 1)));
      const size_t eq = line.rfind(") = ");
      if (eq == absl::string_view::npos) continue;
      absl::string_view result = line.substr(eq + 4);
      result = result.substr(0, result.find('<'));  // "3</path>" with -y
      std::vector<absl::string_view> words = absl::StrSplit(result, ' ');
      event.result = std::string(words[0]);
      if (words[0] == "-1" && words.size() > 1) absl::StrAppend(&event.result, " ", words[1]);
      // Descriptor numbers depend on what the test runner left open.
      if (event.call == "openat" && words[0] != "-1") event.result = "fd";
      // Every path under the temp dir in the arguments (file descriptors
      // print as 3</path> with -y).
      absl::string_view args = line.substr(paren, eq - paren);
      for (size_t at = args.find(dir_.path()); at != absl::string_view::npos;
           at = args.find(dir_.path(), at + 1)) {
        size_t end = args.find_first_of("\"<>, )", at);
        std::string path(args.substr(at, end - at));
        if (path.rfind(step + "/", 0) == 0) {
          path = path.substr(step.size() + 1);
        } else if (path == step) {
          path = "step";
        } else {
          continue;
        }
        event.files.push_back(path);
      }
      if (!event.files.empty()) events.push_back(std::move(event));
    }
    return events;
  }

  TempDir dir_;
  bool skipped_ = false;
};

// Writes collapsed into one event per run of writes to the same file, with
// the sizes kept aside.
std::vector<std::string> Skeleton(const std::vector<Event>& events,
                                  std::vector<std::vector<uint64_t>>* write_runs) {
  std::vector<std::string> out;
  for (const Event& e : events) {
    if (e.call == "write") {
      uint64_t n = 0;
      EXPECT_TRUE(absl::SimpleAtoi(e.result, &n)) << e.ToString();
      const std::string name = "write " + e.files[0];
      if (out.empty() || out.back() != name) {
        out.push_back(name);
        write_runs->emplace_back();
      }
      write_runs->back().push_back(n);
      continue;
    }
    out.push_back(e.ToString());
  }
  return out;
}

TEST_F(TraceTest, DcpSaveIsFileSystemWritersSequence) {
  WorkloadSpec spec;
  spec.kind = WorkloadKind::kDcp;
  spec.ranks = 2;
  spec.tensor_bytes = 49152;
  spec.bytes_per_rank = 2 * 49152 + 3;
  std::vector<Event> events = Trace("dcp", spec.ranks, spec.bytes_per_rank, spec.tensor_bytes);
  if (skipped_) GTEST_SKIP() << "ptrace is not permitted here";
  std::vector<std::vector<uint64_t>> writes;
  const std::vector<std::string> skeleton = Skeleton(events, &writes);
  const std::vector<std::string> expected = {
      "mkdir step = 0",  // the helper's own
      // rank 0: mkdir -p, open, the tensors, fsync, close
      "mkdir step = -1 EEXIST",
      "openat __0_0.distcp = fd",
      "write __0_0.distcp",
      "fsync __0_0.distcp = 0",
      "close __0_0.distcp = 0",
      "mkdir step = -1 EEXIST",
      "openat __1_0.distcp = fd",
      "write __1_0.distcp",
      "fsync __1_0.distcp = 0",
      "close __1_0.distcp = 0",
      // rank 0's finish: .metadata.tmp, fsync, unlink the old, rename
      "openat .metadata.tmp = fd",
      "write .metadata.tmp",
      "fsync .metadata.tmp = 0",
      "close .metadata.tmp = 0",
      "unlink .metadata = -1 ENOENT",
      "rename .metadata.tmp .metadata = 0",
  };
  ASSERT_EQ(skeleton, expected) << absl::StrJoin(skeleton, "\n");
  // Per tensor: the buffered headers, the storage in one write, the tail at
  // torch.save's flush; the 3-byte tensor's whole container at its flush.
  const uint64_t shard = RankFileBytes(spec);
  for (int i : {0, 1}) {
    const std::vector<uint64_t>& w = writes[i];
    ASSERT_EQ(w.size(), 7u) << absl::StrJoin(w, ",");
    EXPECT_EQ(w[1], 49152u);
    EXPECT_EQ(w[4], 49152u);
    EXPECT_LT(w[6], 8192u);
    uint64_t total = 0;
    for (uint64_t n : w) total += n;
    EXPECT_EQ(total, shard);
  }
  ASSERT_EQ(writes[2].size(), 1u);
  EXPECT_EQ(writes[2][0], MetadataFileBytes(spec));

  // Saving again over a finished checkpoint unlinks the old .metadata.
  std::vector<Event> again = Trace("dcp", spec.ranks, spec.bytes_per_rank, spec.tensor_bytes);
  std::vector<std::vector<uint64_t>> unused;
  const std::vector<std::string> second = Skeleton(again, &unused);
  ASSERT_GE(second.size(), 2u);
  EXPECT_EQ(second[second.size() - 2], "unlink .metadata = 0");
  EXPECT_EQ(second.back(), "rename .metadata.tmp .metadata = 0");
}

TEST_F(TraceTest, TorchSaveIsOneWritePerStorageAndNoFsync) {
  WorkloadSpec spec;
  spec.kind = WorkloadKind::kTorch;
  spec.ranks = 1;
  spec.tensor_bytes = 49152;
  spec.bytes_per_rank = 3 * 49152 + 5;
  std::vector<Event> events = Trace("torch", spec.ranks, spec.bytes_per_rank, spec.tensor_bytes);
  if (skipped_) GTEST_SKIP() << "ptrace is not permitted here";
  std::vector<std::vector<uint64_t>> writes;
  const std::vector<std::string> skeleton = Skeleton(events, &writes);
  const std::vector<std::string> expected = {
      "mkdir step = 0",
      "openat rank_00000.pt = fd",
      "write rank_00000.pt",
      "close rank_00000.pt = 0",
  };
  ASSERT_EQ(skeleton, expected) << absl::StrJoin(skeleton, "\n");
  // writev(buffered headers, storage) per storage; the 5-byte storage and
  // the directory go out at close.
  const std::vector<uint64_t>& w = writes[0];
  ASSERT_EQ(w.size(), 4u) << absl::StrJoin(w, ",");
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(w[i], 49152u);
    EXPECT_LT(w[i], 49152u + 8192);
  }
  uint64_t total = 0;
  for (uint64_t n : w) total += n;
  EXPECT_EQ(total, RankFileBytes(spec));
}

}  // namespace
}  // namespace ckptfs::bench
