// The tensors a benchmark rank saves (torch and dcp workloads): how a rank's
// payload is cut into tensor storages, their names, dtypes and shapes, and
// the pickles torch.save writes for them.
//
// Storage i of a rank holds min(tensor_bytes, what is left) bytes. Its
// dtype cycles through bfloat16, float32 and uint8 where the byte count
// allows; its shape is [n / 1024, 1024] when the element count is a
// multiple of 1024 (and more than 1024), else [n].
//
// The pickles are byte for byte what Python's pickler (protocol 2) writes
// for torch.save of PyTorch 1.13: a dict of tensors (torch.save(state_dict))
// or a lone tensor (what DCP's FileSystemWriter saves per tensor), storages
// as persistent ids ('storage', torch.<Type>Storage, key, 'cpu', numel).
//
// Thread-safety: pure functions.
#ifndef CKPTFS_BENCH_TORCH_TENSORS_H_
#define CKPTFS_BENCH_TORCH_TENSORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ckptfs::bench {

enum class TorchDtype { kUInt8, kBFloat16, kFloat32 };

// "torch.uint8", "torch.bfloat16", "torch.float32".
absl::string_view TorchDtypeName(TorchDtype dtype);
// 1, 2, 4.
int TorchDtypeSize(TorchDtype dtype);

struct TorchTensor {
  std::string name;  // the state-dict key, "layers.7.weight"
  TorchDtype dtype = TorchDtype::kUInt8;
  std::vector<int64_t> shape;  // row-major, contiguous
  uint64_t nbytes = 0;         // the storage's size
  std::string storage_key;     // "7": the record is data/7
};

// The tensors of one rank: `total_bytes` cut into storages of at most
// `tensor_bytes`. REQUIRES: tensor_bytes > 0.
std::vector<TorchTensor> RankTensors(uint64_t total_bytes, uint64_t tensor_bytes);

// pickle.dumps({t.name: tensor for t in tensors}, protocol=2) as torch.save
// writes it (data.pkl).
std::string PickleStateDict(const std::vector<TorchTensor>& tensors);

// The same for a lone tensor (storage key "0").
std::string PickleTensor(const TorchTensor& tensor);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_TORCH_TENSORS_H_
