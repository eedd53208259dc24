// The files the torch and dcp workloads write, checked by the real thing:
// Debian's python3-torch (1.13) loads them, Python's zipfile checks every
// CRC and offset, and torch.save of what was loaded reproduces our bytes
// exactly (same container, pickle, alignment and CRCs). Skipped only when
// /usr/bin/python3 cannot import torch.
#include <fcntl.h>
#include <isa-l/crc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/dcp_layout.h"
#include "bench/rank_io.h"
#include "bench/torch_tensors.h"
#include "bench/torch_zip.h"
#include "bench/workload.h"
#include "gtest/gtest.h"
#include "tests/bench/rank_io_testing.h"

namespace ckptfs::bench {
namespace {

using ::ckptfs::bench::testing::ReadWholeFile;
using ::ckptfs::bench::testing::TempDir;

constexpr char kPython[] = "/usr/bin/python3";

struct CommandResult {
  int rc = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunCommand(const std::string& command) {
  CommandResult run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) run.output.append(buf, n);
  const int status = ::pclose(pipe);
  run.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

bool TorchAvailable() {
  static const bool available = RunCommand(absl::StrCat(kPython, " -c 'import torch'")).rc == 0;
  return available;
}

// Runs `script` (written to a file in `dir`) with `args`.
CommandResult RunPython(const std::string& dir, const std::string& script,
                        const std::vector<std::string>& args) {
  const std::string path = dir + "/check.py";
  std::ofstream(path) << script;
  std::string command = absl::StrCat(kPython, " ", path);
  for (const std::string& arg : args) absl::StrAppend(&command, " '", arg, "'");
  return RunCommand(command);
}

std::vector<std::vector<std::string>> Lines(const std::string& output, absl::string_view tag) {
  std::vector<std::vector<std::string>> lines;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!words.empty() && words[0] == tag) lines.push_back(std::move(words));
  }
  return lines;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Loads a torch.save file, lists tensors and zip records (CRC-checked by
// zipfile while streaming, up to 256 MiB), and saves what it loaded to
// argv[2] unless that is "-".
constexpr char kLoadScript[] = R"(
import struct, sys, torch, zipfile
path, out = sys.argv[1], sys.argv[2]
d = torch.load(path)
print("count", len(d))
for k, v in d.items():
    print("tensor", k, str(v.dtype), "[" + ",".join(str(s) for s in v.shape) + "]")
with zipfile.ZipFile(path) as zf, open(path, "rb") as raw:
    for info in zf.infolist():
        raw.seek(info.header_offset + 26)
        n, m = struct.unpack("<HH", raw.read(4))
        start = info.header_offset + 30 + n + m
        head = b""
        with zf.open(info) as member:
            # Read to the end (zipfile then checks the CRC), except members
            # too large to stream in a unit test: their head only.
            while True:
                piece = member.read(1 << 20)
                if not piece:
                    break
                if len(head) < 16:
                    head += piece[:16 - len(head)]
                if info.file_size > (256 << 20):
                    break
        print("record", info.filename, start, info.file_size, head.hex() or "-")
if out != "-":
    torch.save(d, out)
print("done")
)";

struct TorchCase {
  uint64_t bytes_per_rank;
  uint64_t tensor_bytes;
};

class TorchLoadTest : public ::testing::TestWithParam<TorchCase> {
 protected:
  void SetUp() override {
    if (!TorchAvailable()) GTEST_SKIP() << kPython << " cannot import torch";
    ASSERT_FALSE(dir_.path().empty());
  }
  TempDir dir_;
};

TEST_P(TorchLoadTest, TorchLoadsItAndSavesTheSameBytes) {
  WorkloadSpec spec;
  spec.kind = WorkloadKind::kTorch;
  spec.ranks = 1;
  spec.bytes_per_rank = GetParam().bytes_per_rank;
  spec.tensor_bytes = GetParam().tensor_bytes;
  spec.seed = 42;
  std::unique_ptr<RankIo> io = MakePosixRankIo(dir_.path());
  ASSERT_TRUE(io->MakeDirs("ckpt").ok());
  ASSERT_TRUE(io->MakeDirs("resaved").ok());
  absl::StatusOr<RankTimes> saved = SaveRank(*io, spec, 0, "ckpt", nullptr);
  ASSERT_TRUE(saved.ok()) << saved.status();
  const std::string file = RankFiles(spec, 0)[0];
  const std::string path = dir_.path() + "/ckpt/" + file;
  const std::string resaved = dir_.path() + "/resaved/" + file;  // same name: same archive

  CommandResult run = RunPython(dir_.path(), kLoadScript, {path, resaved});
  ASSERT_EQ(run.rc, 0) << run.output;

  const std::vector<TorchTensor> tensors = RankTensors(spec.bytes_per_rank, spec.tensor_bytes);
  std::vector<std::vector<std::string>> count = Lines(run.output, "count");
  ASSERT_EQ(count.size(), 1u) << run.output;
  EXPECT_EQ(count[0][1], std::to_string(tensors.size()));
  std::vector<std::vector<std::string>> listed = Lines(run.output, "tensor");
  ASSERT_EQ(listed.size(), tensors.size()) << run.output;
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(listed[i][1], tensors[i].name);
    EXPECT_EQ(listed[i][2], TorchDtypeName(tensors[i].dtype));
    EXPECT_EQ(listed[i][3], ShapeString(tensors[i].shape));
  }
  // Records: data.pkl first, then the storages in sorted key order, each
  // 64-byte aligned, then the version; payload bytes as in the file.
  const std::string bytes = ReadWholeFile(path);
  std::vector<std::vector<std::string>> records = Lines(run.output, "record");
  ASSERT_EQ(records.size(), tensors.size() + 2) << run.output;
  const std::string archive = TorchArchiveName(file);
  EXPECT_EQ(records.front()[1], archive + "/data.pkl");
  EXPECT_EQ(records.back()[1], archive + "/version");
  std::vector<std::string> keys;
  for (const TorchTensor& t : tensors) keys.push_back(t.storage_key);
  std::sort(keys.begin(), keys.end());
  for (size_t i = 0; i < records.size(); ++i) {
    uint64_t start = 0;
    uint64_t size = 0;
    ASSERT_TRUE(absl::SimpleAtoi(records[i][2], &start));
    ASSERT_TRUE(absl::SimpleAtoi(records[i][3], &size));
    EXPECT_EQ(start % 64, 0u) << records[i][1];
    if (i >= 1 && i <= tensors.size()) {
      EXPECT_EQ(records[i][1], archive + "/data/" + keys[i - 1]);
      const size_t head = std::min<uint64_t>(16, size);
      std::string hex;
      for (size_t j = 0; j < head; ++j) {
        absl::StrAppend(&hex, absl::Hex(static_cast<uint8_t>(bytes[start + j]), absl::kZeroPad2));
      }
      EXPECT_EQ(records[i][4], hex) << records[i][1];
    }
  }
  // torch.save of what torch.load returned: the very same file.
  const std::string theirs = ReadWholeFile(resaved);
  ASSERT_EQ(theirs.size(), bytes.size());
  EXPECT_TRUE(theirs == bytes) << "torch.save's bytes differ from ours";
  EXPECT_EQ(saved->bytes, bytes.size());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TorchLoadTest,
    ::testing::Values(TorchCase{12 * 65536 + 7, 65536},  // 13 storages: keys 0, 1, 10, ...
                      TorchCase{3 * 1048576 + 1024, 1048576},
                      TorchCase{1001 * 8, 8}),  // 1001 tensors: pickle batches, long memo
    [](const ::testing::TestParamInfo<TorchCase>& info) {
      return absl::StrCat(info.param.bytes_per_rank, "_in_", info.param.tensor_bytes);
    });

// A sink that writes container bytes into a sparse file and skips payload
// (zeros), so a > 4 GiB torch.save costs no disk and little time.
class SparseFileSink : public ByteSink {
 public:
  explicit SparseFileSink(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)) {}
  ~SparseFileSink() override {
    if (fd_ >= 0) {
      if (::ftruncate(fd_, static_cast<off_t>(offset_)) != 0) {
        // The Python check fails loudly.
      }
      ::close(fd_);
    }
  }
  bool ok() const { return fd_ >= 0; }
  absl::Status Literal(absl::string_view bytes) override {
    if (::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset_)) !=
        static_cast<ssize_t>(bytes.size())) {
      return absl::InternalError("pwrite");
    }
    offset_ += bytes.size();
    return absl::OkStatus();
  }
  absl::StatusOr<uint32_t> Payload(uint64_t size, bool want_crc) override {
    static const std::vector<unsigned char> zeros(1 << 20, 0);
    uint32_t crc = 0;
    for (uint64_t done = 0; done < size;) {
      const uint64_t n = std::min<uint64_t>(zeros.size(), size - done);
      crc = crc32_gzip_refl(crc, zeros.data(), n);
      done += n;
    }
    offset_ += size;
    return crc;
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  uint64_t offset() const override { return offset_; }

 private:
  int fd_;
  uint64_t offset_ = 0;
};

TEST(TorchZip64Test, StoragesAndOffsetsBeyond4GiBLoad) {
  if (!TorchAvailable()) GTEST_SKIP() << kPython << " cannot import torch";
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  // A record over 4 GiB (zip64 sizes) and records after it (zip64 offsets,
  // 24-byte data descriptors). So that the test does not load 4 GiB, the
  // pickle refers to the small storage only: torch.load still parses every
  // central directory entry and reads data/1 beyond 4 GiB.
  const uint64_t big = (uint64_t{4} << 30) + 65536;
  const std::vector<TorchTensor> tensors = RankTensors(big + 164, big);
  ASSERT_EQ(tensors.size(), 2u);
  const std::string path = dir.path() + "/big.pt";
  {
    SparseFileSink sink(path);
    ASSERT_TRUE(sink.ok());
    TorchZipWriter zip(sink, "big");
    ASSERT_TRUE(zip.WriteRecord("data.pkl", PickleStateDict({tensors[1]})).ok());
    ASSERT_TRUE(zip.WritePayloadRecord("data/0", big).ok());
    ASSERT_TRUE(zip.WritePayloadRecord("data/1", tensors[1].nbytes).ok());
    ASSERT_TRUE(zip.WriteEndOfFile().ok());
  }
  CommandResult run = RunPython(dir.path(), kLoadScript, {path, "-"});
  ASSERT_EQ(run.rc, 0) << run.output;
  std::vector<std::vector<std::string>> listed = Lines(run.output, "tensor");
  ASSERT_EQ(listed.size(), 1u) << run.output;
  EXPECT_EQ(listed[0][1], tensors[1].name);
  EXPECT_EQ(listed[0][2], TorchDtypeName(tensors[1].dtype));
  EXPECT_EQ(listed[0][3], ShapeString(tensors[1].shape));
  std::vector<std::vector<std::string>> records = Lines(run.output, "record");
  ASSERT_EQ(records.size(), 4u) << run.output;
  EXPECT_EQ(records[1][1], "big/data/0");
  EXPECT_EQ(records[1][3], std::to_string(big));
  for (int i : {2, 3}) {
    uint64_t start = 0;
    ASSERT_TRUE(absl::SimpleAtoi(records[i][2], &start));
    EXPECT_GT(start, uint64_t{4} << 30) << records[i][1];
    EXPECT_EQ(start % 64, 0u) << records[i][1];
  }
}

// DCP: each item of a shard is a torch.save(tensor) container that
// torch.load reads from its (offset, length) slice, and that torch.save of
// the loaded tensor reproduces byte for byte.
constexpr char kDcpScript[] = R"(
import io, sys, torch
path = sys.argv[1]
items = [tuple(int(x) for x in s.split(":")) for s in sys.argv[2].split(",")]
data = open(path, "rb").read()
print("size", len(data))
for offset, length in items:
    piece = data[offset:offset + length]
    t = torch.load(io.BytesIO(piece))
    again = io.BytesIO()
    torch.save(t, again)
    print("item", str(t.dtype), "[" + ",".join(str(s) for s in t.shape) + "]",
          "same" if again.getvalue() == piece else "differs")
)";

TEST(DcpLoadTest, EveryItemLoadsFromItsSlice) {
  if (!TorchAvailable()) GTEST_SKIP() << kPython << " cannot import torch";
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  WorkloadSpec spec;
  spec.kind = WorkloadKind::kDcp;
  spec.ranks = 2;
  spec.bytes_per_rank = 5 * 49152 + 3;  // the last tensor fits Python's buffer
  spec.tensor_bytes = 49152;
  std::unique_ptr<RankIo> io = MakePosixRankIo(dir.path());
  ASSERT_TRUE(io->MakeDirs("step").ok());
  for (int rank = 0; rank < spec.ranks; ++rank) {
    ASSERT_TRUE(SaveRank(*io, spec, rank, "step", nullptr).ok());
  }
  ASSERT_TRUE(FinalizeSave(*io, spec, "step", nullptr).ok());

  const std::vector<TorchTensor> tensors = RankTensors(spec.bytes_per_rank, spec.tensor_bytes);
  CountingSink counter;
  absl::StatusOr<std::vector<DcpItem>> items = WriteDcpShard(counter, tensors);
  ASSERT_TRUE(items.ok());
  std::vector<std::string> arg;
  for (const DcpItem& item : *items) arg.push_back(absl::StrCat(item.offset, ":", item.length));
  const std::string path = dir.path() + "/step/" + DcpShardName(1);
  CommandResult run = RunPython(dir.path(), kDcpScript, {path, absl::StrJoin(arg, ",")});
  ASSERT_EQ(run.rc, 0) << run.output;
  std::vector<std::vector<std::string>> size = Lines(run.output, "size");
  ASSERT_EQ(size.size(), 1u);
  EXPECT_EQ(size[0][1], std::to_string(counter.offset()));  // the items tile the file
  std::vector<std::vector<std::string>> loaded = Lines(run.output, "item");
  ASSERT_EQ(loaded.size(), tensors.size()) << run.output;
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(loaded[i][1], TorchDtypeName(tensors[i].dtype));
    EXPECT_EQ(loaded[i][2], ShapeString(tensors[i].shape));
    EXPECT_EQ(loaded[i][3], "same") << "item " << i;
  }
}

}  // namespace
}  // namespace ckptfs::bench
