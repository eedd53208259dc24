// See workload.h. Each workload is written once against a ByteSink
// (workload_streams.h): the save side writes through the stream its real
// program uses, the load side replays the same sequence to verify.
#include "bench/workload.h"

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/data_pattern.h"
#include "bench/dcp_layout.h"
#include "bench/torch_tensors.h"
#include "bench/torch_zip.h"
#include "bench/workload_buffers.h"
#include "bench/workload_streams.h"
#include "common/errno_status.h"

namespace ckptfs::bench {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  while (!dir.empty() && dir.back() == '/') dir.remove_suffix(1);
  if (dir.empty()) return std::string(name);
  return absl::StrCat(dir, "/", name);
}

// The pattern's file id: the workload and the file's index among the rank's.
uint32_t FileId(WorkloadKind kind, int index) {
  return (static_cast<uint32_t>(kind) + 1) << 8 | static_cast<uint32_t>(index);
}

// Sizes from a dry run of a container workload.
struct DryRun {
  uint64_t file_bytes = 0;
  std::vector<DcpItem> items;  // dcp only
};

// Runs `emit` on a CountingSink.
template <typename Emit>
DryRun Measure(Emit emit) {
  CountingSink counter;
  DryRun run;
  run.items = emit(counter);
  run.file_bytes = counter.offset();
  return run;
}

DryRun MeasureTorch(const std::vector<TorchTensor>& tensors, absl::string_view file) {
  return Measure([&](ByteSink& sink) {
    WriteTorchSave(sink, TorchArchiveName(file), tensors).IgnoreError();  // counting: no errors
    return std::vector<DcpItem>{};
  });
}

DryRun MeasureDcp(const std::vector<TorchTensor>& tensors) {
  return Measure([&](ByteSink& sink) {
    absl::StatusOr<std::vector<DcpItem>> items = WriteDcpShard(sink, tensors);
    return items.ok() ? *std::move(items) : std::vector<DcpItem>{};
  });
}

std::string MetadataText(const WorkloadSpec& spec) {
  const std::vector<TorchTensor> tensors = RankTensors(spec.bytes_per_rank, spec.tensor_bytes);
  return DcpMetadata(spec.ranks, spec.seed, tensors, MeasureDcp(tensors).items);
}

// Closes `handle` after a failure, keeping the first error.
absl::Status CloseAfter(RankIo& io, int handle, absl::Status status) {
  absl::Status closed = io.Close(handle);
  return status.ok() ? closed : status;
}

absl::Status SaveRaw(RankIo& io, const WorkloadSpec& spec, int rank, const std::string& path,
                     ProgressSink* progress) {
  absl::StatusOr<int> handle = io.Create(path);
  if (!handle.ok()) return handle.status();
  const DataPattern pattern(spec.seed, rank, FileId(spec.kind, 0));
  ScratchBuffer buffer =
      ScratchBuffer::Acquire(std::min<uint64_t>(spec.io_size, spec.bytes_per_rank));
  absl::Status status;
  for (uint64_t offset = 0; offset < spec.bytes_per_rank && status.ok();) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(spec.io_size, spec.bytes_per_rank - offset));
    pattern.Fill(offset, buffer.data(), n);
    status = io.Write(*handle, buffer.data(), n);
    if (status.ok() && progress != nullptr) progress->OnBytes(n);
    offset += n;
  }
  if (status.ok()) status = io.Fsync(*handle);
  return CloseAfter(io, *handle, status);
}

absl::Status SaveTorch(RankIo& io, const WorkloadSpec& spec, int rank, const std::string& path,
                       absl::string_view file, ProgressSink* progress) {
  const std::vector<TorchTensor> tensors = RankTensors(spec.bytes_per_rank, spec.tensor_bytes);
  const std::string pickle = PickleStateDict(tensors);
  const uint64_t largest = std::max<uint64_t>(std::min(spec.tensor_bytes, spec.bytes_per_rank),
                                              pickle.size() + 128 * (tensors.size() + 2));
  ScratchBuffer buffer = ScratchBuffer::Acquire(WriteBufferBytes(largest, spec.max_write_bytes));
  const DataPattern pattern(spec.seed, rank, FileId(spec.kind, 0));

  absl::StatusOr<int> handle = io.Create(path);  // std::ofstream(path, trunc)
  if (!handle.ok()) return handle.status();
  WriteTarget target{&io, *handle, path, &pattern, progress, spec.max_write_bytes};
  CxxFilebufSink sink(std::move(target), buffer);
  absl::Status status = WriteTorchSave(sink, TorchArchiveName(file), tensors);
  if (status.ok()) status = sink.Close();  // the ofstream's close: no fsync
  return CloseAfter(io, *handle, status);
}

absl::Status SaveDcp(RankIo& io, const WorkloadSpec& spec, int rank, absl::string_view step_dir,
                     const std::string& path, ProgressSink* progress) {
  // FileSystemWriter.prepare_local_plan: every rank runs mkdir -p.
  if (!step_dir.empty()) {
    if (absl::Status status = io.MakeDirs(step_dir); !status.ok()) return status;
  }
  const std::vector<TorchTensor> tensors = RankTensors(spec.bytes_per_rank, spec.tensor_bytes);
  ScratchBuffer buffer = ScratchBuffer::Acquire(
      WriteBufferBytes(std::min(spec.tensor_bytes, spec.bytes_per_rank), spec.max_write_bytes));
  const DataPattern pattern(spec.seed, rank, FileId(spec.kind, 0));

  absl::StatusOr<int> handle = io.Create(path);  // open(path, "wb")
  if (!handle.ok()) return handle.status();
  WriteTarget target{&io, *handle, path, &pattern, progress, spec.max_write_bytes};
  PyBufferedSink sink(std::move(target), buffer);
  absl::Status status = WriteDcpShard(sink, tensors).status();
  if (status.ok()) status = sink.Flush();
  if (status.ok()) status = io.Fsync(*handle);  // os.fsync(stream.fileno())
  return CloseAfter(io, *handle, status);
}

// Reads `path` and checks it against what `emit` produces on a VerifySink.
template <typename Emit>
absl::Status VerifyFile(RankIo& io, const WorkloadSpec& spec, int shard, int file_index,
                        const std::string& path, uint64_t expected_size, ScratchBuffer& buffer,
                        ProgressSink* progress, RankTimes& times, Emit emit) {
  absl::StatusOr<int> handle = io.OpenRead(path);
  if (!handle.ok()) return handle.status();
  const DataPattern pattern(spec.seed, shard, FileId(spec.kind, file_index));
  VerifySink sink(io, *handle, path, pattern, buffer, spec.io_size, expected_size, progress);
  absl::Status status = emit(sink);
  if (status.ok()) status = sink.Finish();
  if (times.first_byte_ns == 0) times.first_byte_ns = sink.first_byte_ns();
  times.bytes += sink.bytes_read();
  return CloseAfter(io, *handle, status);
}

}  // namespace

absl::StatusOr<WorkloadKind> ParseWorkloadKind(absl::string_view name) {
  if (name == "raw") return WorkloadKind::kRaw;
  if (name == "torch") return WorkloadKind::kTorch;
  if (name == "dcp") return WorkloadKind::kDcp;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown workload \"", name, "\": choose raw, torch or dcp"));
}

absl::string_view WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kRaw:
      return "raw";
    case WorkloadKind::kTorch:
      return "torch";
    case WorkloadKind::kDcp:
      return "dcp";
  }
  return "?";
}

const std::vector<Preset>& Presets() {
  static const auto* presets = new std::vector<Preset>{
      {"llama3-8b", 8, uint64_t{105'000'000'000}},
      {"llama3-70b", 64, uint64_t{912'000'000'000}},
  };
  return *presets;
}

absl::StatusOr<WorkloadSpec> SpecFromPreset(absl::string_view name, double scale,
                                            WorkloadKind kind) {
  const Preset* preset = nullptr;
  std::vector<std::string> names;
  for (const Preset& p : Presets()) {
    names.push_back(p.name);
    if (p.name == name) preset = &p;
  }
  if (preset == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown preset \"", name, "\": choose ", absl::StrJoin(names, ", ")));
  }
  if (!(scale > 0 && scale <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("--scale must be in (0, 1], got %g", scale));
  }
  const double total = static_cast<double>(preset->total_bytes) * scale;
  WorkloadSpec spec;
  spec.kind = kind;
  spec.ranks = preset->ranks;
  if (total / spec.ranks < static_cast<double>(kMiB)) {
    spec.ranks = std::max(1, static_cast<int>(total / static_cast<double>(kMiB)));
  }
  const uint64_t per_rank = static_cast<uint64_t>(total / spec.ranks);
  spec.bytes_per_rank = std::max<uint64_t>(4096, per_rank / 4096 * 4096);
  return spec;
}

absl::Status ValidateSpec(const WorkloadSpec& spec) {
  if (spec.ranks < 1) return absl::InvalidArgumentError("ranks must be at least 1");
  if (spec.bytes_per_rank == 0) return absl::InvalidArgumentError("bytes per rank must be > 0");
  if (spec.io_size == 0) return absl::InvalidArgumentError("io size must be > 0");
  if (spec.tensor_bytes == 0) return absl::InvalidArgumentError("tensor bytes must be > 0");
  return absl::OkStatus();
}

std::vector<std::string> RankFiles(const WorkloadSpec& spec, int rank) {
  switch (spec.kind) {
    case WorkloadKind::kRaw:
      return {absl::StrFormat("rank_%05d.bin", rank)};
    case WorkloadKind::kTorch:
      return {absl::StrFormat("rank_%05d.pt", rank)};
    case WorkloadKind::kDcp:
      return {DcpShardName(rank)};
  }
  return {};
}

uint64_t RankFileBytes(const WorkloadSpec& spec) {
  switch (spec.kind) {
    case WorkloadKind::kRaw:
      return spec.bytes_per_rank;
    case WorkloadKind::kTorch:
      return MeasureTorch(RankTensors(spec.bytes_per_rank, spec.tensor_bytes),
                          RankFiles(spec, 0)[0])
          .file_bytes;
    case WorkloadKind::kDcp:
      return MeasureDcp(RankTensors(spec.bytes_per_rank, spec.tensor_bytes)).file_bytes;
  }
  return 0;
}

uint64_t MetadataFileBytes(const WorkloadSpec& spec) {
  return spec.kind == WorkloadKind::kDcp ? MetadataText(spec).size() : 0;
}

absl::StatusOr<RankTimes> SaveRank(RankIo& io, const WorkloadSpec& spec, int rank,
                                   absl::string_view step_dir, ProgressSink* sink) {
  if (absl::Status status = ValidateSpec(spec); !status.ok()) return status;
  RankTimes times;
  times.start_ns = MonotonicNs();
  const std::string file = RankFiles(spec, rank)[0];
  const std::string path = JoinPath(step_dir, file);
  absl::Status status;
  switch (spec.kind) {
    case WorkloadKind::kRaw:
      status = SaveRaw(io, spec, rank, path, sink);
      break;
    case WorkloadKind::kTorch:
      status = SaveTorch(io, spec, rank, path, file, sink);
      break;
    case WorkloadKind::kDcp:
      status = SaveDcp(io, spec, rank, step_dir, path, sink);
      break;
  }
  if (!status.ok()) return status;
  times.end_ns = MonotonicNs();
  times.bytes = RankFileBytes(spec);
  return times;
}

absl::StatusOr<RankTimes> FinalizeSave(RankIo& io, const WorkloadSpec& spec,
                                       absl::string_view step_dir, ProgressSink* sink) {
  if (absl::Status status = ValidateSpec(spec); !status.ok()) return status;
  RankTimes times;
  times.start_ns = MonotonicNs();
  if (spec.kind == WorkloadKind::kDcp) {
    // FileSystemWriter.finish on rank 0.
    const std::string text = MetadataText(spec);
    const std::string tmp = JoinPath(step_dir, kDcpMetadataTmpName);
    const std::string final_path = JoinPath(step_dir, kDcpMetadataName);
    absl::StatusOr<int> handle = io.Create(tmp);
    if (!handle.ok()) return handle.status();
    absl::Status status = io.Write(*handle, text.data(), text.size());
    if (status.ok() && sink != nullptr) sink->OnBytes(text.size());
    if (status.ok()) status = io.Fsync(*handle);
    status = CloseAfter(io, *handle, status);
    if (!status.ok()) return status;
    // "delete in-case other checkpoints were present", then publish.
    if (absl::Status unlinked = io.Unlink(final_path); !unlinked.ok() && !IsGone(unlinked)) {
      return unlinked;
    }
    if (absl::Status renamed = io.Rename(tmp, final_path); !renamed.ok()) return renamed;
    times.bytes = text.size();
  }
  times.end_ns = MonotonicNs();
  return times;
}

absl::StatusOr<RankTimes> LoadRank(RankIo& io, const WorkloadSpec& spec, int shard,
                                   absl::string_view step_dir, ProgressSink* sink) {
  if (absl::Status status = ValidateSpec(spec); !status.ok()) return status;
  RankTimes times;
  times.start_ns = MonotonicNs();
  ScratchBuffer buffer = ScratchBuffer::Acquire(spec.io_size);
  const std::string file = RankFiles(spec, shard)[0];
  const std::string path = JoinPath(step_dir, file);
  absl::Status status;
  switch (spec.kind) {
    case WorkloadKind::kRaw:
      status = VerifyFile(
          io, spec, shard, 0, path, spec.bytes_per_rank, buffer, sink, times,
          [&](ByteSink& verify) { return verify.Payload(spec.bytes_per_rank, false).status(); });
      break;
    case WorkloadKind::kTorch: {
      const std::vector<TorchTensor> tensors = RankTensors(spec.bytes_per_rank, spec.tensor_bytes);
      const uint64_t size = MeasureTorch(tensors, file).file_bytes;
      status =
          VerifyFile(io, spec, shard, 0, path, size, buffer, sink, times, [&](ByteSink& verify) {
            return WriteTorchSave(verify, TorchArchiveName(file), tensors);
          });
      break;
    }
    case WorkloadKind::kDcp: {
      // FileSystemReader: every rank reads .metadata, then its items.
      const std::string text = MetadataText(spec);
      status =
          VerifyFile(io, spec, shard, 0, JoinPath(step_dir, kDcpMetadataName), text.size(), buffer,
                     sink, times, [&](ByteSink& verify) { return verify.Literal(text); });
      if (!status.ok()) break;
      const std::vector<TorchTensor> tensors = RankTensors(spec.bytes_per_rank, spec.tensor_bytes);
      const uint64_t size = MeasureDcp(tensors).file_bytes;
      status =
          VerifyFile(io, spec, shard, 0, path, size, buffer, sink, times,
                     [&](ByteSink& verify) { return WriteDcpShard(verify, tensors).status(); });
      break;
    }
  }
  if (!status.ok()) return status;
  times.end_ns = MonotonicNs();
  return times;
}

}  // namespace ckptfs::bench
