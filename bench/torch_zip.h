// TorchZipWriter: the zip container of torch.save, record for record as
// PyTorch 1.13's PyTorchStreamWriter (caffe2/serialize/inline_container.cc
// over its patched miniz) writes it, emitted through a ByteSink.
//
// Per record: a 30-byte local header (version 0, flags 0x0808: sizes in a
// data descriptor, UTF-8 names; stored; time and date 0; CRC and sizes 0),
// the name "<archive>/<record>", a zip64 extra field when the record is
// 4 GiB or larger or starts at or beyond 4 GiB, an "FB" extra field of 'Z's
// padding the payload to a 64-byte boundary, the payload, and a data
// descriptor (16 bytes, or 24 with 64-bit sizes when the record has the
// zip64 extra). WriteEndOfFile adds the "version" record ("3\n"), the
// central directory (one write), the zip64 end record, its locator and the
// end record. Offsets are relative to where the writer started, as miniz
// counts them (DCP places several containers in one file).
//
// Thread-safety: one writer per thread.
#ifndef CKPTFS_BENCH_TORCH_ZIP_H_
#define CKPTFS_BENCH_TORCH_ZIP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/torch_tensors.h"
#include "bench/workload_streams.h"

namespace ckptfs::bench {

// torch.save's archive name for a path: the file name without directories
// and without its last extension ("a/rank_00003.pt" -> "rank_00003").
std::string TorchArchiveName(absl::string_view path);

class TorchZipWriter {
 public:
  // Writes into `sink` from its current offset on; `archive_name` is the
  // top directory of every record ("archive" for a stream).
  TorchZipWriter(ByteSink& sink, std::string archive_name);

  // A record holding `bytes` (data.pkl).
  absl::Status WriteRecord(absl::string_view name, absl::string_view bytes);
  // A record of `size` payload bytes from the sink's pattern (a storage).
  absl::Status WritePayloadRecord(absl::string_view name, uint64_t size);
  // The version record, the central directory and the end records.
  absl::Status WriteEndOfFile();

 private:
  struct Entry {
    std::string name;
    uint32_t crc = 0;
    uint64_t size = 0;
    uint64_t local_header_offset = 0;
  };
  // Emits the headers before a record's data; true if it has the zip64
  // extra field.
  absl::StatusOr<bool> StartRecord(const Entry& entry, const std::string& full_name);
  // Emits the data descriptor and remembers the central directory entry.
  absl::Status FinishRecord(const Entry& entry, const std::string& full_name, bool zip64);
  uint64_t cursor() const { return sink_.offset() - start_; }

  ByteSink& sink_;
  const std::string archive_name_;
  const uint64_t start_;
  std::vector<Entry> entries_;
  std::string central_dir_;
};

// The whole torch.save file of a state dict of `tensors` (data.pkl, the
// storages data/<key> in sorted key order, the end of file).
absl::Status WriteTorchSave(ByteSink& sink, absl::string_view archive_name,
                            const std::vector<TorchTensor>& tensors);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_TORCH_ZIP_H_
