// ckptfs_bench_workload_trace: runs one workload through PosixRankIo with
// no runner around it, so that tests can watch its exact system calls with
// strace.
//
//   ckptfs_bench_workload_trace save|load raw|torch|dcp ROOT STEP_DIR RANKS
//                               BYTES_PER_RANK TENSOR_BYTES [IO_SIZE]
//
// save: SaveRank for every rank in order, then FinalizeSave. load: LoadRank
// of every rank. Exits 1 with the error on stderr.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "bench/rank_io.h"
#include "bench/workload.h"

namespace ckptfs::bench {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ckptfs_bench_workload_trace: %s\n", status.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr,
                 "usage: %s save|load raw|torch|dcp ROOT STEP_DIR RANKS BYTES_PER_RANK "
                 "TENSOR_BYTES [IO_SIZE]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  absl::StatusOr<WorkloadKind> kind = ParseWorkloadKind(argv[2]);
  if (!kind.ok()) return Fail(kind.status());
  WorkloadSpec spec;
  spec.kind = *kind;
  uint32_t io_size = spec.io_size;
  if (!absl::SimpleAtoi(argv[5], &spec.ranks) || !absl::SimpleAtoi(argv[6], &spec.bytes_per_rank) ||
      !absl::SimpleAtoi(argv[7], &spec.tensor_bytes) ||
      (argc > 8 && !absl::SimpleAtoi(argv[8], &io_size))) {
    return Fail(
        absl::InvalidArgumentError("RANKS, BYTES_PER_RANK, TENSOR_BYTES, IO_SIZE: numbers"));
  }
  spec.io_size = io_size;
  const std::string step_dir = argv[4];
  std::unique_ptr<RankIo> io = MakePosixRankIo(argv[3]);
  if (mode == "save") {
    if (absl::Status status = io->MakeDirs(step_dir); !status.ok()) return Fail(status);
    for (int rank = 0; rank < spec.ranks; ++rank) {
      absl::StatusOr<RankTimes> times = SaveRank(*io, spec, rank, step_dir, nullptr);
      if (!times.ok()) return Fail(times.status());
    }
    absl::StatusOr<RankTimes> times = FinalizeSave(*io, spec, step_dir, nullptr);
    if (!times.ok()) return Fail(times.status());
  } else if (mode == "load") {
    for (int rank = 0; rank < spec.ranks; ++rank) {
      absl::StatusOr<RankTimes> times = LoadRank(*io, spec, rank, step_dir, nullptr);
      if (!times.ok()) return Fail(times.status());
    }
  } else {
    return Fail(absl::InvalidArgumentError("mode must be save or load"));
  }
  return 0;
}

}  // namespace
}  // namespace ckptfs::bench

int main(int argc, char** argv) { return ckptfs::bench::Main(argc, argv); }
