// Tests of the workloads through PosixRankIo on a temporary directory:
// presets, names, save/finalize/load round trips, the write pattern each
// workload promises, and that every kind of damage is caught and named.
#include "bench/workload.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/rank_io.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/bench/rank_io_testing.h"

namespace ckptfs::bench {
namespace {

using ::ckptfs::bench::testing::PatchFile;
using ::ckptfs::bench::testing::ReadWholeFile;
using ::ckptfs::bench::testing::RecordingRankIo;
using ::ckptfs::bench::testing::TempDir;

class CountingProgress : public ProgressSink {
 public:
  void OnBytes(uint64_t bytes) override { total += bytes; }
  uint64_t total = 0;
};

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

TEST(WorkloadNames, ParseAndName) {
  for (WorkloadKind kind : {WorkloadKind::kRaw, WorkloadKind::kTorch, WorkloadKind::kDcp}) {
    absl::StatusOr<WorkloadKind> parsed = ParseWorkloadKind(WorkloadKindName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  absl::StatusOr<WorkloadKind> bad = ParseWorkloadKind("safetensors");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("raw, torch or dcp"), std::string::npos);
}

TEST(WorkloadNames, RankFiles) {
  WorkloadSpec spec;
  spec.kind = WorkloadKind::kRaw;
  EXPECT_EQ(RankFiles(spec, 17), std::vector<std::string>{"rank_00017.bin"});
  spec.kind = WorkloadKind::kTorch;
  EXPECT_EQ(RankFiles(spec, 3), std::vector<std::string>{"rank_00003.pt"});
  spec.kind = WorkloadKind::kDcp;
  EXPECT_EQ(RankFiles(spec, 12), std::vector<std::string>{"__12_0.distcp"});
}

TEST(Presets, MlperfStorageShapes) {
  ASSERT_EQ(Presets().size(), 2u);
  EXPECT_EQ(Presets()[0].name, "llama3-8b");
  EXPECT_EQ(Presets()[0].ranks, 8);
  EXPECT_EQ(Presets()[0].total_bytes, 105'000'000'000u);
  EXPECT_EQ(Presets()[1].name, "llama3-70b");
  EXPECT_EQ(Presets()[1].ranks, 64);
  EXPECT_EQ(Presets()[1].total_bytes, 912'000'000'000u);

  absl::StatusOr<WorkloadSpec> full = SpecFromPreset("llama3-8b", 1.0, WorkloadKind::kDcp);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->kind, WorkloadKind::kDcp);
  EXPECT_EQ(full->ranks, 8);
  EXPECT_EQ(full->bytes_per_rank, 105'000'000'000u / 8 / 4096 * 4096);

  absl::StatusOr<WorkloadSpec> scaled = SpecFromPreset("llama3-70b", 0.001, WorkloadKind::kRaw);
  ASSERT_TRUE(scaled.ok());
  EXPECT_EQ(scaled->ranks, 64);
  EXPECT_EQ(scaled->bytes_per_rank, 912'000'000u / 64 / 4096 * 4096);

  // Too little for 64 ranks of 1 MiB: fewer ranks, each at least 1 MiB.
  absl::StatusOr<WorkloadSpec> tiny = SpecFromPreset("llama3-70b", 1e-5, WorkloadKind::kRaw);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->ranks, static_cast<int>(9'120'000 / (1 << 20)));
  EXPECT_GE(tiny->bytes_per_rank, 1u << 20);

  EXPECT_TRUE(absl::IsInvalidArgument(SpecFromPreset("gpt-5", 1, WorkloadKind::kRaw).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(SpecFromPreset("llama3-8b", 0, WorkloadKind::kRaw).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(SpecFromPreset("llama3-8b", 2, WorkloadKind::kRaw).status()));
}

class WorkloadTest : public ::testing::TestWithParam<WorkloadKind> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    io_ = MakePosixRankIo(dir_.path());
    ASSERT_TRUE(io_->MakeDirs("step").ok());
    spec_.kind = GetParam();
    spec_.ranks = 2;
    spec_.bytes_per_rank = (1 << 20) + 100;  // one 1 MiB storage and a small one
    spec_.tensor_bytes = 1 << 20;
    spec_.io_size = 256 * 1024;
    spec_.seed = 5;
  }

  void SaveAll() {
    for (int rank = 0; rank < spec_.ranks; ++rank) {
      absl::StatusOr<RankTimes> times = SaveRank(*io_, spec_, rank, "step", nullptr);
      ASSERT_TRUE(times.ok()) << times.status();
    }
    absl::StatusOr<RankTimes> fin = FinalizeSave(*io_, spec_, "step", nullptr);
    ASSERT_TRUE(fin.ok()) << fin.status();
  }

  std::string Path(int rank) const { return dir_.path() + "/step/" + RankFiles(spec_, rank)[0]; }

  absl::Status Load(int shard) { return LoadRank(*io_, spec_, shard, "step", nullptr).status(); }

  TempDir dir_;
  std::unique_ptr<RankIo> io_;
  WorkloadSpec spec_;
};

TEST_P(WorkloadTest, SavesAndLoadsEveryByte) {
  CountingProgress saved;
  for (int rank = 0; rank < spec_.ranks; ++rank) {
    absl::StatusOr<RankTimes> times = SaveRank(*io_, spec_, rank, "step", &saved);
    ASSERT_TRUE(times.ok()) << times.status();
    EXPECT_EQ(times->bytes, RankFileBytes(spec_));
    EXPECT_EQ(FileSize(Path(rank)), RankFileBytes(spec_));
    EXPECT_GT(times->start_ns, 0);
    EXPECT_GE(times->end_ns, times->start_ns);
    EXPECT_EQ(times->first_byte_ns, 0);
  }
  absl::StatusOr<RankTimes> fin = FinalizeSave(*io_, spec_, "step", &saved);
  ASSERT_TRUE(fin.ok()) << fin.status();
  EXPECT_EQ(fin->bytes, MetadataFileBytes(spec_));
  EXPECT_EQ(saved.total, spec_.ranks * RankFileBytes(spec_) + MetadataFileBytes(spec_));
  if (spec_.kind == WorkloadKind::kRaw) {
    EXPECT_EQ(RankFileBytes(spec_), spec_.bytes_per_rank);
  } else {
    EXPECT_GT(RankFileBytes(spec_), spec_.bytes_per_rank);
  }

  for (int shard = 0; shard < spec_.ranks; ++shard) {
    CountingProgress loaded;
    absl::StatusOr<RankTimes> times = LoadRank(*io_, spec_, shard, "step", &loaded);
    ASSERT_TRUE(times.ok()) << times.status();
    EXPECT_EQ(times->bytes, RankFileBytes(spec_) + MetadataFileBytes(spec_));
    EXPECT_EQ(loaded.total, times->bytes);
    EXPECT_GE(times->first_byte_ns, times->start_ns);
    EXPECT_LE(times->first_byte_ns, times->end_ns);
  }
  // Broadcast: every reader reads shard 0.
  for (int reader = 0; reader < 3; ++reader) EXPECT_TRUE(Load(0).ok());
}

TEST_P(WorkloadTest, AFlippedPayloadByteIsNamed) {
  SaveAll();
  const uint64_t offset = FileSize(Path(1)) / 2 + 3;  // inside the 1 MiB storage
  std::string byte = ReadWholeFile(Path(1)).substr(offset, 1);
  byte[0] = static_cast<char>(byte[0] ^ 0x01);
  PatchFile(Path(1), offset, byte);
  EXPECT_TRUE(Load(0).ok());
  absl::Status status = Load(1);
  ASSERT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find(RankFiles(spec_, 1)[0]), std::string::npos) << status;
  EXPECT_NE(status.message().find(absl::StrCat("offset ", offset, " ")), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("payload"), std::string::npos) << status;
}

// torch and dcp files have container bytes (raw files are all payload).
class ContainerTest : public WorkloadTest {};

TEST_P(ContainerTest, AFlippedContainerByteIsNamed) {
  SaveAll();
  const uint64_t offset = FileSize(Path(0)) - 10;  // the zip end record
  std::string byte = ReadWholeFile(Path(0)).substr(offset, 1);
  byte[0] = static_cast<char>(byte[0] ^ 0x80);
  PatchFile(Path(0), offset, byte);
  absl::Status status = Load(0);
  ASSERT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find(absl::StrCat("offset ", offset, " ")), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("container"), std::string::npos) << status;
}

TEST_P(WorkloadTest, ATruncatedOrExtendedFileIsCaught) {
  SaveAll();
  const uint64_t size = FileSize(Path(0));
  ASSERT_EQ(::truncate(Path(0).c_str(), static_cast<off_t>(size - 1)), 0);
  absl::Status status = Load(0);
  ASSERT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find(absl::StrCat("ends at offset ", size - 1)), std::string::npos)
      << status;

  ASSERT_EQ(::truncate(Path(1).c_str(), static_cast<off_t>(size + 4096)), 0);
  status = Load(1);
  ASSERT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find("longer"), std::string::npos) << status;
}

TEST_P(WorkloadTest, SwappedBlocksAreCaughtAndNamed) {
  SaveAll();
  const std::string data = ReadWholeFile(Path(0));
  const uint64_t a = 64 * 4096;  // both inside the 1 MiB storage
  const uint64_t b = 72 * 4096;
  PatchFile(Path(0), a, data.substr(b, 4096));
  PatchFile(Path(0), b, data.substr(a, 4096));
  absl::Status status = Load(0);
  ASSERT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find(absl::StrCat("offset ", a)), std::string::npos) << status;
  EXPECT_NE(status.message().find("holds rank 0"), std::string::npos) << status;
  EXPECT_NE(status.message().find(absl::StrCat("page 72 ")), std::string::npos) << status;
}

TEST_P(WorkloadTest, AnotherRanksFileIsCaught) {
  SaveAll();
  ASSERT_TRUE(io_->Rename("step/" + RankFiles(spec_, 1)[0], "step/" + RankFiles(spec_, 0)[0]).ok());
  absl::Status status = Load(0);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
}

TEST_P(WorkloadTest, AMissingFileIsNotFound) {
  SaveAll();
  ASSERT_TRUE(io_->Unlink("step/" + RankFiles(spec_, 1)[0]).ok());
  absl::Status status = Load(1);
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_NE(status.message().find(RankFiles(spec_, 1)[0]), std::string::npos) << status;
}

TEST_P(WorkloadTest, ADifferentSeedIsCaught) {
  SaveAll();
  spec_.seed = 6;
  EXPECT_TRUE(absl::IsDataLoss(Load(0))) << Load(0);
}

TEST_P(WorkloadTest, LargestWriteIsBounded) {
  RecordingRankIo recorder(*io_);
  spec_.max_write_bytes = 64 * 1024;
  for (int rank = 0; rank < spec_.ranks; ++rank) {
    ASSERT_TRUE(SaveRank(recorder, spec_, rank, "step", nullptr).ok());
  }
  ASSERT_TRUE(FinalizeSave(recorder, spec_, "step", nullptr).ok());
  size_t largest = 0;
  for (size_t n : recorder.write_sizes()) largest = std::max(largest, n);
  // raw writes io_size pieces whatever max_write_bytes says.
  EXPECT_LE(largest, spec_.kind == WorkloadKind::kRaw ? spec_.io_size : 64u * 1024);
  EXPECT_GE(recorder.write_sizes().size(), spec_.kind == WorkloadKind::kRaw ? 10u : 32u);
  EXPECT_TRUE(Load(0).ok());
  EXPECT_TRUE(Load(1).ok());
}

TEST_P(WorkloadTest, AFailedWriteReturnsItsErrno) {
  RecordingRankIo recorder(*io_);
  recorder.FailWrites(ENOSPC, 1);
  absl::StatusOr<RankTimes> times = SaveRank(recorder, spec_, 0, "step", nullptr);
  ASSERT_FALSE(times.ok());
  EXPECT_EQ(ErrnoFromStatus(times.status()), ENOSPC) << times.status();
}

INSTANTIATE_TEST_SUITE_P(Kinds, WorkloadTest,
                         ::testing::Values(WorkloadKind::kRaw, WorkloadKind::kTorch,
                                           WorkloadKind::kDcp),
                         [](const ::testing::TestParamInfo<WorkloadKind>& info) {
                           return std::string(WorkloadKindName(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(Kinds, ContainerTest,
                         ::testing::Values(WorkloadKind::kTorch, WorkloadKind::kDcp),
                         [](const ::testing::TestParamInfo<WorkloadKind>& info) {
                           return std::string(WorkloadKindName(info.param));
                         });

TEST(WorkloadPattern, RawIsIoSizeWritesAndOneFsync) {
  TempDir dir;
  std::unique_ptr<RankIo> posix = MakePosixRankIo(dir.path());
  RecordingRankIo io(*posix);
  WorkloadSpec spec;
  spec.kind = WorkloadKind::kRaw;
  spec.bytes_per_rank = 5 * (1 << 20) + 1000;
  ASSERT_TRUE(SaveRank(io, spec, 0, "", nullptr).ok());
  EXPECT_EQ(io.write_sizes(),
            (std::vector<size_t>{1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1000}));
  EXPECT_EQ(io.fsyncs(), 1);
}

TEST(WorkloadPattern, TorchWritesEachStorageOnceAndNeverFsyncs) {
  TempDir dir;
  std::unique_ptr<RankIo> posix = MakePosixRankIo(dir.path());
  RecordingRankIo io(*posix);
  WorkloadSpec spec;
  spec.kind = WorkloadKind::kTorch;
  spec.bytes_per_rank = 3 * (4 << 20);
  spec.tensor_bytes = 4 << 20;
  ASSERT_TRUE(SaveRank(io, spec, 0, "", nullptr).ok());
  ASSERT_EQ(io.write_sizes().size(), 4u);  // 3 storages (with headers), the rest at close
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(io.write_sizes()[i], 4u << 20);
    EXPECT_LT(io.write_sizes()[i], (4u << 20) + 8192);
  }
  EXPECT_EQ(io.fsyncs(), 0);
}

TEST(WorkloadPattern, DcpFinalizeReplacesAnOldMetadata) {
  TempDir dir;
  std::unique_ptr<RankIo> io = MakePosixRankIo(dir.path());
  WorkloadSpec spec;
  spec.kind = WorkloadKind::kDcp;
  spec.ranks = 1;
  spec.bytes_per_rank = 100000;
  spec.tensor_bytes = 30000;
  ASSERT_TRUE(io->MakeDirs("s").ok());
  ASSERT_TRUE(SaveRank(*io, spec, 0, "s", nullptr).ok());
  ASSERT_TRUE(FinalizeSave(*io, spec, "s", nullptr).ok());
  spec.seed = 9;  // the metadata names the seed: a new one replaces it
  ASSERT_TRUE(SaveRank(*io, spec, 0, "s", nullptr).ok());
  ASSERT_TRUE(FinalizeSave(*io, spec, "s", nullptr).ok());
  EXPECT_NE(ReadWholeFile(dir.path() + "/s/.metadata").find("seed 9"), std::string::npos);
  EXPECT_EQ(FileSize(dir.path() + "/s/.metadata.tmp"), 0u);  // renamed away
  EXPECT_TRUE(LoadRank(*io, spec, 0, "s", nullptr).ok());
  // A damaged .metadata is named.
  PatchFile(dir.path() + "/s/.metadata", 3, "X");
  absl::Status status = LoadRank(*io, spec, 0, "s", nullptr).status();
  ASSERT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find(".metadata"), std::string::npos) << status;
}

TEST(WorkloadSpecs, InvalidSpecsAreRefused) {
  TempDir dir;
  std::unique_ptr<RankIo> io = MakePosixRankIo(dir.path());
  WorkloadSpec spec;
  spec.io_size = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(SaveRank(*io, spec, 0, "", nullptr).status()));
  spec = WorkloadSpec();
  spec.tensor_bytes = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(LoadRank(*io, spec, 0, "", nullptr).status()));
  spec = WorkloadSpec();
  spec.ranks = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(FinalizeSave(*io, spec, "", nullptr).status()));
}

}  // namespace
}  // namespace ckptfs::bench
