// Workloads of ckptfs-bench: what one rank writes for a checkpoint save and
// reads back on load, byte for byte reproducible so that every byte read is
// verified against what was written.
//
//   raw    1 MiB write() calls, fsync, close: one file per rank.
//   torch  the write pattern of torch.save to a path: a zip container
//          (stored, not compressed) with 64-byte aligned records, data.pkl
//          first, one large write per tensor storage, storages over 2 GiB
//          split, no fsync. torch.load accepts the file, and torch.save of
//          what it loads reproduces it byte for byte (PyTorch 1.13).
//          "Split" as torch and Linux split it: one storage is one zip
//          record, written by calls of at most 2,147,479,552 bytes.
//   dcp    torch.distributed.checkpoint's FileSystemWriter: each rank runs
//          mkdir -p, writes `__{rank}_0.distcp` (each tensor its own
//          torch.save container, through Python's 8 KiB buffered stream)
//          and fsyncs it; then rank 0 writes `.metadata.tmp`, fsyncs it,
//          unlinks the old `.metadata` and renames `.metadata.tmp` to
//          `.metadata` (FinalizeSave). Unlike Python, every byte of
//          .metadata.tmp is written before its fsync.
//
// Loads read each file from its start to its end in io_size reads (the
// dcp load reads `.metadata` first), not torch.load's seeks.
//
// The bytes of rank r are a pure function of (seed, r, file, offset)
// (bench/data_pattern.h) so a loader regenerates and compares them
// without keeping anything in memory; payload is produced into buffers
// leased from a process-wide pool of touched memory and reused
// (bench/workload_buffers.h).
//
// Thread-safety: pure functions of their arguments; SaveRank/LoadRank use
// only the RankIo and sink they are given.
#ifndef CKPTFS_BENCH_WORKLOAD_H_
#define CKPTFS_BENCH_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/rank_io.h"

namespace ckptfs::bench {

enum class WorkloadKind { kRaw, kTorch, kDcp };

// "raw", "torch", "dcp"; InvalidArgument naming the choices otherwise.
absl::StatusOr<WorkloadKind> ParseWorkloadKind(absl::string_view name);
absl::string_view WorkloadKindName(WorkloadKind kind);

struct WorkloadSpec {
  WorkloadKind kind = WorkloadKind::kRaw;
  int ranks = 8;
  uint64_t bytes_per_rank = uint64_t{64} << 20;
  // raw: the size of each write() call; load: the size of each read().
  uint32_t io_size = 1 << 20;
  // torch and dcp: the size of each tensor storage (the last one of a rank
  // holds the remainder).
  uint64_t tensor_bytes = uint64_t{64} << 20;
  uint64_t seed = 1;
  // torch and dcp: the largest single write. 0 (the default) writes each
  // storage in one call as torch does (the kernel cuts calls at
  // 2,147,479,552 bytes), which needs a buffer as large as a storage per
  // rank; a smaller value bounds that memory (e.g. thousands of --native
  // ranks) at the cost of more, smaller writes. At least 64 KiB is used.
  uint64_t max_write_bytes = 0;
};

// InvalidArgument naming the field when `spec` cannot be run (ranks < 1,
// bytes_per_rank, io_size or tensor_bytes 0).
absl::Status ValidateSpec(const WorkloadSpec& spec);

// The bytes of each rank's files once saved (payload + container; the same
// for every rank), and for dcp the size of the .metadata file FinalizeSave
// writes (0 for raw and torch).
uint64_t RankFileBytes(const WorkloadSpec& spec);
uint64_t MetadataFileBytes(const WorkloadSpec& spec);

// An MLPerf Storage v2.0 checkpointing shape.
struct Preset {
  std::string name;      // "llama3-8b", "llama3-70b"
  int ranks;             // 8, 64
  uint64_t total_bytes;  // 105e9, 912e9 (all ranks together)
};
const std::vector<Preset>& Presets();
// The preset called `name`, shrunk by `scale` (0 < scale <= 1: total bytes
// times scale, ranks kept unless fewer bytes than 1 MiB per rank remain).
absl::StatusOr<WorkloadSpec> SpecFromPreset(absl::string_view name, double scale,
                                            WorkloadKind kind);

// Told of progress as bytes move; the runner draws timelines from it.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // `bytes` more were written or read (payload and container alike).
  virtual void OnBytes(uint64_t bytes) = 0;
};

struct RankTimes {
  int64_t start_ns = 0;       // CLOCK_MONOTONIC (comparable across processes)
  int64_t first_byte_ns = 0;  // load: when the first byte arrived; save: 0
  int64_t end_ns = 0;
  uint64_t bytes = 0;  // file bytes written or read (payload + container)
};

// The files rank `rank` writes, relative to the step directory.
std::vector<std::string> RankFiles(const WorkloadSpec& spec, int rank);

// Writes rank `rank`'s files into `step_dir` (relative to the RankIo root;
// it exists). Creates them fresh each time.
absl::StatusOr<RankTimes> SaveRank(RankIo& io, const WorkloadSpec& spec, int rank,
                                   absl::string_view step_dir, ProgressSink* sink);

// After every rank's SaveRank returned: what rank 0 does once for the whole
// checkpoint (dcp: the .metadata sequence; raw, torch: nothing).
absl::StatusOr<RankTimes> FinalizeSave(RankIo& io, const WorkloadSpec& spec,
                                       absl::string_view step_dir, ProgressSink* sink);

// Reads back every file rank `shard` wrote into `step_dir` and compares each
// byte with what SaveRank wrote: DataLoss naming the file and offset of the
// first difference, or a short/long file. `shard` is the reader's own rank
// for a load, and the same rank for all readers of a broadcast load.
absl::StatusOr<RankTimes> LoadRank(RankIo& io, const WorkloadSpec& spec, int shard,
                                   absl::string_view step_dir, ProgressSink* sink);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_WORKLOAD_H_
