// See torch_zip.h. Constants and field order follow miniz's writer
// (mz_zip_writer_add_mem_ex_v2, mz_zip_writer_finalize_archive) with the
// flags PyTorch passes (MZ_ZIP_FLAG_WRITE_ZIP64, no compression) and its
// alignment padding (detail::getPadding, kFieldAlignment = 64).
#include "bench/torch_zip.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ckptfs::bench {
namespace {

constexpr uint64_t kUint32Max = 0xFFFFFFFFu;
constexpr uint64_t kFieldAlignment = 64;
constexpr uint16_t kFlagsWithDescriptor = 0x0808;  // has locator | UTF-8
constexpr uint16_t kFlagsNoDescriptor = 0x0800;

void Le16(std::string& out, uint64_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void Le32(std::string& out, uint64_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void Le64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// mz_zip_writer_create_zip64_extra_data with the fields miniz passes.
std::string Zip64Extra(uint64_t size, uint64_t local_header_offset) {
  std::string extra;
  Le16(extra, 0x0001);
  Le16(extra, 0);
  if (size >= kUint32Max) {
    Le64(extra, size);  // uncompressed
    Le64(extra, size);  // compressed
  }
  if (local_header_offset >= kUint32Max) Le64(extra, local_header_offset);
  const uint64_t field_size = extra.size() - 4;
  extra[2] = static_cast<char>(field_size & 0xFF);
  extra[3] = static_cast<char>(field_size >> 8);
  return extra;
}

bool NeedsZip64(uint64_t size, uint64_t local_header_offset) {
  return size >= kUint32Max || local_header_offset >= kUint32Max;
}

}  // namespace

std::string TorchArchiveName(absl::string_view path) {
  size_t start = path.find_last_of("/\\");
  start = start == absl::string_view::npos ? 0 : start + 1;
  absl::string_view name = path.substr(start);
  const size_t dot = name.find_last_of('.');
  if (dot != absl::string_view::npos) name = name.substr(0, dot);
  return std::string(name);
}

TorchZipWriter::TorchZipWriter(ByteSink& sink, std::string archive_name)
    : sink_(sink), archive_name_(std::move(archive_name)), start_(sink.offset()) {}

absl::StatusOr<bool> TorchZipWriter::StartRecord(const Entry& entry, const std::string& full_name) {
  const uint64_t offset = entry.local_header_offset;
  const bool zip64 = NeedsZip64(entry.size, offset);
  const std::string zip64_extra = zip64 ? Zip64Extra(entry.size, offset) : "";
  // detail::getPadding: where the payload would start without padding.
  const uint64_t start = offset + 30 + full_name.size() + 4 + zip64_extra.size();
  const uint64_t padding = (kFieldAlignment - start % kFieldAlignment) % kFieldAlignment;

  std::string header;
  Le32(header, 0x04034b50);
  Le16(header, 0);  // version needed: stored
  Le16(header, entry.size > 0 ? kFlagsWithDescriptor : kFlagsNoDescriptor);
  Le16(header, 0);  // method: stored
  Le16(header, 0);  // time
  Le16(header, 0);  // date
  Le32(header, 0);  // CRC, sizes: in the data descriptor
  Le32(header, 0);
  Le32(header, 0);
  Le16(header, full_name.size());
  Le16(header, zip64_extra.size() + 4 + padding);
  // miniz writes the header, the name and the zip64 extra separately, then
  // PyTorch's padding field: four writes, as the stream sees them.
  std::string fb = "FB";
  Le16(fb, padding);
  fb.append(padding, 'Z');
  for (absl::string_view piece : {absl::string_view(header), absl::string_view(full_name),
                                  absl::string_view(zip64_extra), absl::string_view(fb)}) {
    if (piece.empty()) continue;
    if (absl::Status status = sink_.Literal(piece); !status.ok()) return status;
  }
  return zip64;
}

absl::Status TorchZipWriter::FinishRecord(const Entry& entry, const std::string& full_name,
                                          bool zip64) {
  if (entry.size > 0) {
    std::string descriptor;
    Le32(descriptor, 0x08074b50);
    Le32(descriptor, entry.crc);
    if (zip64) {
      Le64(descriptor, entry.size);
      Le64(descriptor, entry.size);
    } else {
      Le32(descriptor, entry.size);
      Le32(descriptor, entry.size);
    }
    if (absl::Status status = sink_.Literal(descriptor); !status.ok()) return status;
  }
  // The central directory entry (mz_zip_writer_create_central_dir_header).
  const std::string zip64_extra = zip64 ? Zip64Extra(entry.size, entry.local_header_offset) : "";
  std::string& cd = central_dir_;
  Le32(cd, 0x02014b50);
  Le16(cd, 0);  // version made by
  Le16(cd, 0);  // version needed
  Le16(cd, entry.size > 0 ? kFlagsWithDescriptor : kFlagsNoDescriptor);
  Le16(cd, 0);  // method
  Le16(cd, 0);  // time
  Le16(cd, 0);  // date
  Le32(cd, entry.crc);
  Le32(cd, std::min(entry.size, kUint32Max));
  Le32(cd, std::min(entry.size, kUint32Max));
  Le16(cd, full_name.size());
  Le16(cd, zip64_extra.size());
  Le16(cd, 0);  // comment
  Le16(cd, 0);  // disk
  Le16(cd, 0);  // internal attributes
  Le32(cd, 0);  // external attributes
  Le32(cd, std::min(entry.local_header_offset, kUint32Max));
  cd.append(full_name);
  cd.append(zip64_extra);
  entries_.push_back(entry);
  return absl::OkStatus();
}

absl::Status TorchZipWriter::WriteRecord(absl::string_view name, absl::string_view bytes) {
  const std::string full_name = absl::StrCat(archive_name_, "/", name);
  Entry entry;
  entry.name = std::string(name);
  entry.size = bytes.size();
  entry.local_header_offset = cursor();
  absl::StatusOr<bool> zip64 = StartRecord(entry, full_name);
  if (!zip64.ok()) return zip64.status();
  if (!bytes.empty()) {
    if (absl::Status status = sink_.Literal(bytes); !status.ok()) return status;
  }
  entry.crc =
      crc32_gzip_refl(0, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return FinishRecord(entry, full_name, *zip64);
}

absl::Status TorchZipWriter::WritePayloadRecord(absl::string_view name, uint64_t size) {
  const std::string full_name = absl::StrCat(archive_name_, "/", name);
  Entry entry;
  entry.name = std::string(name);
  entry.size = size;
  entry.local_header_offset = cursor();
  absl::StatusOr<bool> zip64 = StartRecord(entry, full_name);
  if (!zip64.ok()) return zip64.status();
  if (size > 0) {
    absl::StatusOr<uint32_t> crc = sink_.Payload(size, /*want_crc=*/true);
    if (!crc.ok()) return crc.status();
    entry.crc = *crc;
  }
  return FinishRecord(entry, full_name, *zip64);
}

absl::Status TorchZipWriter::WriteEndOfFile() {
  if (absl::Status status = WriteRecord("version", "3\n"); !status.ok()) return status;
  const uint64_t cd_offset = cursor();
  const uint64_t cd_size = central_dir_.size();
  const uint64_t files = entries_.size();
  if (absl::Status status = sink_.Literal(central_dir_); !status.ok()) return status;

  const uint64_t zip64_end_offset = cursor();
  std::string zip64_end;
  Le32(zip64_end, 0x06064b50);
  Le64(zip64_end, 56 - 12);
  Le16(zip64_end, 0x031E);  // made by: Unix
  Le16(zip64_end, 0x002D);  // needed: 4.5
  Le32(zip64_end, 0);       // this disk
  Le32(zip64_end, 0);       // disk of the central directory
  Le64(zip64_end, files);
  Le64(zip64_end, files);
  Le64(zip64_end, cd_size);
  Le64(zip64_end, cd_offset);
  if (absl::Status status = sink_.Literal(zip64_end); !status.ok()) return status;

  std::string locator;
  Le32(locator, 0x07064b50);
  Le32(locator, 0);
  Le64(locator, zip64_end_offset);
  Le32(locator, 1);
  if (absl::Status status = sink_.Literal(locator); !status.ok()) return status;

  std::string end;
  Le32(end, 0x06054b50);
  Le16(end, 0);
  Le16(end, 0);
  Le16(end, std::min<uint64_t>(files, 0xFFFF));
  Le16(end, std::min<uint64_t>(files, 0xFFFF));
  Le32(end, std::min(cd_size, kUint32Max));
  Le32(end, std::min(cd_offset, kUint32Max));
  Le16(end, 0);  // comment
  return sink_.Literal(end);
}

absl::Status WriteTorchSave(ByteSink& sink, absl::string_view archive_name,
                            const std::vector<TorchTensor>& tensors) {
  TorchZipWriter zip(sink, std::string(archive_name));
  if (absl::Status status = zip.WriteRecord("data.pkl", PickleStateDict(tensors)); !status.ok()) {
    return status;
  }
  // torch.save writes the storages in sorted(str) key order.
  std::vector<const TorchTensor*> order;
  for (const TorchTensor& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TorchTensor* a, const TorchTensor* b) {
    return a->storage_key < b->storage_key;
  });
  for (const TorchTensor* t : order) {
    absl::Status status = zip.WritePayloadRecord(absl::StrCat("data/", t->storage_key), t->nbytes);
    if (!status.ok()) return status;
  }
  return zip.WriteEndOfFile();
}

}  // namespace ckptfs::bench
