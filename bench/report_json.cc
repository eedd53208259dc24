// See report_json.h.
#include "bench/report_json.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "bench/json_writer.h"
#include "bench/summary.h"
#include "common/errno_status.h"
#include "common/unique_fd.h"

namespace ckptfs::bench {
namespace {

const char* CommitName(CommitMode mode) {
  switch (mode) {
    case CommitMode::kAuto:
      return "auto";
    case CommitMode::kOn:
      return "on";
    case CommitMode::kOff:
      return "off";
  }
  return "?";
}

void WriteOptions(JsonWriter& j, const BenchOptions& o) {
  j.Key("options").BeginObject();
  j.Key("workload").String(WorkloadKindName(o.spec.kind));
  j.Key("ranks").Int(o.spec.ranks);
  j.Key("bytes_per_rank").Number(static_cast<double>(o.spec.bytes_per_rank));
  j.Key("io_size").Int(o.spec.io_size);
  j.Key("tensor_bytes").Number(static_cast<double>(o.spec.tensor_bytes));
  j.Key("seed").Number(static_cast<double>(o.spec.seed));
  j.Key("preset").String(o.preset);
  j.Key("scale").Number(o.scale);
  j.Key("phases").BeginArray();
  for (Phase phase : o.phases) j.String(PhaseName(phase));
  j.EndArray();
  j.Key("repeat").Int(o.repeat);
  j.Key("commit").String(CommitName(o.commit));
  j.Key("native").Bool(o.native);
  j.Key("threads").Int(o.threads);
  j.Key("phase_timeout_s").Int(o.phase_timeout_s);
  j.Key("commit_timeout_s").Int(o.commit_timeout_s);
  j.EndObject();
}

void WriteTargets(JsonWriter& j, const BenchResult& result) {
  j.Key("targets").BeginArray();
  for (const TargetDescription& t : result.targets) {
    j.BeginObject();
    j.Key("label").String(t.label);
    j.Key("path").String(t.path);
    j.Key("root").String(t.root);
    j.Key("native").Bool(t.native);
    j.Key("fs_type").String(t.fs_type);
    j.Key("is_ckptfs").Bool(t.is_ckptfs);
    j.Key("commit").Bool(t.commit);
    j.Key("commit_note").String(t.commit_note);
    j.Key("target_procs").BeginArray();
    for (const std::string& p : t.target_procs) j.String(p);
    j.EndArray();
    j.Key("target_procs_label").String(t.target_procs_label);
    j.EndObject();
  }
  j.EndArray();
}

void WriteRecords(JsonWriter& j, const BenchResult& result) {
  auto rel = [&](int64_t ns) { return static_cast<double>(ns - result.start_ns) / 1e9; };
  j.Key("phases").BeginArray();
  for (const PhaseRecord& r : result.records) {
    j.BeginObject();
    j.Key("target").String(r.target);
    j.Key("repeat").Int(r.repeat);
    j.Key("phase").String(PhaseName(r.phase));
    j.Key("figures").BeginObject();
    for (const Figure& f : ComputeFigures(r)) j.Key(f.key).Number(f.value);
    j.EndObject();
    j.Key("ranks").BeginArray();
    for (const RankRecord& rank : r.ranks) {
      j.BeginObject();
      j.Key("rank").Int(rank.rank);
      j.Key("start_s").Number(rel(rank.times.start_ns));
      if (rank.times.first_byte_ns != 0)
        j.Key("first_byte_s").Number(rel(rank.times.first_byte_ns));
      j.Key("end_s").Number(rel(rank.times.end_ns));
      j.Key("bytes").Number(static_cast<double>(rank.times.bytes));
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
}

void WriteOptional(JsonWriter& j, const std::optional<double>& v) {
  if (v.has_value()) {
    j.Number(*v);
  } else {
    j.Null();
  }
}

void WriteSummary(JsonWriter& j, const BenchOptions& options, const BenchResult& result) {
  j.Key("summary").BeginArray();
  for (const SummaryRow& row : Summarize(result.records, options.repeat)) {
    j.BeginObject();
    j.Key("phase").String(PhaseName(row.phase));
    j.Key("figure").String(row.key);
    const FigureInfo* info = FindFigureInfo(row.key);
    if (info != nullptr) {
      j.Key("label").String(info->label);
      j.Key("higher_is_better").Bool(info->higher_is_better);
    }
    j.Key("a").BeginArray();
    for (const auto& v : row.a) WriteOptional(j, v);
    j.EndArray();
    j.Key("median_a");
    WriteOptional(j, row.median_a);
    if (result.targets.size() > 1) {
      j.Key("b").BeginArray();
      for (const auto& v : row.b) WriteOptional(j, v);
      j.EndArray();
      j.Key("median_b");
      WriteOptional(j, row.median_b);
      j.Key("ratio_median");
      WriteOptional(j, row.ratio);
    }
    j.EndObject();
  }
  j.EndArray();
}

void WriteThroughput(JsonWriter& j, const BenchResult& result) {
  j.Key("progress").BeginArray();
  for (size_t s = 0; s < result.segments.size(); ++s) {
    const ProgressSegment& seg = result.segments[s];
    j.BeginObject();
    j.Key("target").String(seg.target);
    j.Key("repeat").Int(seg.repeat);
    j.Key("phase").String(PhaseName(seg.phase));
    j.Key("samples").BeginArray();  // [seconds from start, bytes so far]
    for (const ProgressPoint& p : result.points) {
      if (p.segment != static_cast<int>(s)) continue;
      j.BeginArray();
      j.Number(static_cast<double>(p.t_ns - result.start_ns) / 1e9);
      j.Number(static_cast<double>(p.bytes));
      j.EndArray();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
}

}  // namespace

std::string BenchJson(const BenchOptions& options, const BenchResult& result) {
  JsonWriter j;
  j.BeginObject();
  j.Key("tool").String("ckptfs-bench");
  j.Key("duration_s").Number(static_cast<double>(result.end_ns - result.start_ns) / 1e9);
  WriteOptions(j, options);
  WriteTargets(j, result);
  j.Key("disk").BeginObject();
  j.Key("device").String(result.disk);
  j.Key("reason").String(result.disk_reason);
  j.EndObject();
  j.Key("notes").BeginArray();
  for (const std::string& note : result.notes) j.String(note);
  j.EndArray();
  WriteSummary(j, options, result);
  WriteRecords(j, result);
  WriteThroughput(j, result);
  j.EndObject();
  return j.str() + "\n";
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return SyscallError(errno, absl::StrCat("open ", path));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return SyscallError(errno, absl::StrCat("write ", path));
    done += static_cast<size_t>(n);
  }
  if (::close(fd.Release()) != 0) return SyscallError(errno, absl::StrCat("close ", path));
  return absl::OkStatus();
}

}  // namespace ckptfs::bench
