// See dcp_layout.h.
#include "bench/dcp_layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/torch_zip.h"

namespace ckptfs::bench {

std::string DcpShardName(int rank) { return absl::StrCat("__", rank, "_0.distcp"); }

absl::StatusOr<std::vector<DcpItem>> WriteDcpShard(ByteSink& sink,
                                                   const std::vector<TorchTensor>& tensors) {
  std::vector<DcpItem> items;
  items.reserve(tensors.size());
  for (const TorchTensor& t : tensors) {
    DcpItem item;
    item.offset = sink.offset();
    TorchZipWriter zip(sink, "archive");
    if (absl::Status s = zip.WriteRecord("data.pkl", PickleTensor(t)); !s.ok()) return s;
    if (absl::Status s = zip.WritePayloadRecord("data/0", t.nbytes); !s.ok()) return s;
    if (absl::Status s = zip.WriteEndOfFile(); !s.ok()) return s;
    if (absl::Status s = sink.Flush(); !s.ok()) return s;
    item.length = sink.offset() - item.offset;
    items.push_back(item);
  }
  return items;
}

std::string DcpMetadata(int ranks, uint64_t seed, const std::vector<TorchTensor>& tensors,
                        const std::vector<DcpItem>& items) {
  std::string text =
      absl::StrFormat("ckptfs-bench dcp metadata v1: %d ranks, %u tensors per rank, seed %u\n",
                      ranks, tensors.size(), seed);
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string file = DcpShardName(rank);
    for (size_t i = 0; i < tensors.size() && i < items.size(); ++i) {
      absl::StrAppendFormat(&text, "%s rank%d.%s %s [%s] offset %u length %u\n", file, rank,
                            tensors[i].name, TorchDtypeName(tensors[i].dtype),
                            absl::StrJoin(tensors[i].shape, ", "), items[i].offset,
                            items[i].length);
    }
  }
  return text;
}

}  // namespace ckptfs::bench
