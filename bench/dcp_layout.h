// The files of torch.distributed.checkpoint's FileSystemWriter
// (single_file_per_rank, the default), as the dcp workload writes them.
//
// `__{rank}_0.distcp` holds each of the rank's tensors as its own
// torch.save(tensor, stream) container (archive name "archive", records
// data.pkl, data/0, version), one after the other in one Python stream,
// which is flushed after each tensor (torch.save's exit does). The
// `.metadata` file rank 0 writes is here a deterministic text that lists
// every item (file, tensor, dtype, shape, offset, length) as DCP's pickled
// Metadata does; its size grows with ranks x tensors as the real one.
//
// Thread-safety: pure functions.
#ifndef CKPTFS_BENCH_DCP_LAYOUT_H_
#define CKPTFS_BENCH_DCP_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/torch_tensors.h"
#include "bench/workload_streams.h"

namespace ckptfs::bench {

// "__{rank}_0.distcp".
std::string DcpShardName(int rank);
inline constexpr char kDcpMetadataName[] = ".metadata";
inline constexpr char kDcpMetadataTmpName[] = ".metadata.tmp";

// Where one tensor's container lies in its shard file.
struct DcpItem {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Emits a shard of `tensors` into `sink`; returns each tensor's item.
absl::StatusOr<std::vector<DcpItem>> WriteDcpShard(ByteSink& sink,
                                                   const std::vector<TorchTensor>& tensors);

// The .metadata text for `ranks` ranks, each holding `tensors` at `items`.
std::string DcpMetadata(int ranks, uint64_t seed, const std::vector<TorchTensor>& tensors,
                        const std::vector<DcpItem>& items);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_DCP_LAYOUT_H_
