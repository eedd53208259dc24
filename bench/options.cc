// See options.h.
#include "bench/options.h"

#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tools/flags.h"

namespace ckptfs::bench {
namespace {

tools::CommandSpec BenchSpec() {
  tools::CommandSpec spec;
  spec.name = "bench";
  spec.summary = "save/load storm benchmark";
  spec.flags = {
      {"dir", "DIR", "target directory", ""},
      {"native", "", "ranks are threads using libckptfs directly", ""},
      {"meta", "HOST:PORT", "metadata service for --native", ""},
      {"baseline", "DIR", "second target, run alternately", ""},
      {"workload", "KIND", "raw|torch|dcp", "raw"},
      {"ranks", "N", "ranks", ""},
      {"size", "SIZE", "bytes per rank", ""},
      {"io-size", "SIZE", "write/read call size", "1M"},
      {"tensor-size", "SIZE", "tensor storage size", "64M"},
      {"max-write", "SIZE", "largest torch/dcp write", ""},
      {"preset", "NAME", "MLPerf Storage shape", ""},
      {"scale", "F", "preset scale", ""},
      {"phases", "LIST", "phases", "save,commit,load,bcast"},
      {"repeat", "N", "repeats", "3"},
      {"commit", "MODE", "auto|on|off", "auto"},
      {"threads", "N", "native threads", "64"},
      {"phase-timeout", "SECONDS", "phase time limit", "0"},
      {"commit-timeout", "SECONDS", "barrier timeout", "0"},
      {"target-procs", "LIST", "target processes", ""},
      {"disk", "NAME", "block device to report on", ""},
      {"json", "FILE", "JSON output", ""},
      {"plot", "FILE", "SVG output", ""},
      {"progress", "MODE", "auto|on|off", "auto"},
      {"seed", "N", "data seed", "1"},
  };
  return spec;
}

absl::Status Usage(absl::string_view message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<uint64_t> SizeFlag(const tools::ParsedFlags& flags, absl::string_view name) {
  absl::StatusOr<uint64_t> size = ParseByteSize(flags.Get(name));
  if (!size.ok()) return Usage(absl::StrCat("--", name, ": ", size.status().message()));
  return *size;
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view body = absl::StripAsciiWhitespace(text);
  const std::string original(body);
  if (absl::EndsWithIgnoreCase(body, "ib")) {
    body.remove_suffix(2);
  } else if (absl::EndsWithIgnoreCase(body, "b")) {
    body.remove_suffix(1);
  }
  uint64_t multiplier = 1;
  if (!body.empty()) {
    switch (absl::ascii_toupper(body.back())) {
      case 'K':
        multiplier = uint64_t{1} << 10;
        break;
      case 'M':
        multiplier = uint64_t{1} << 20;
        break;
      case 'G':
        multiplier = uint64_t{1} << 30;
        break;
      case 'T':
        multiplier = uint64_t{1} << 40;
        break;
      default:
        break;
    }
    if (multiplier != 1) body.remove_suffix(1);
  }
  const std::string bad = absl::StrCat(
      "\"", original, "\" is not a size (a number of bytes, or with K, M, G, T: 64M, 1.5G)");
  if (body.empty()) return absl::InvalidArgumentError(bad);
  uint64_t whole = 0;
  if (absl::SimpleAtoi(body, &whole)) {
    if (whole > UINT64_MAX / multiplier) return absl::InvalidArgumentError(bad);
    whole *= multiplier;
  } else {
    double value = 0;
    if (multiplier == 1 || !absl::SimpleAtod(body, &value) || !std::isfinite(value) || value < 0 ||
        value * static_cast<double>(multiplier) > 1.8e19) {
      return absl::InvalidArgumentError(bad);
    }
    whole = static_cast<uint64_t>(std::llround(value * static_cast<double>(multiplier)));
  }
  if (whole == 0) return absl::InvalidArgumentError(absl::StrCat("size ", original, " is 0"));
  return whole;
}

absl::StatusOr<ParsedCommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  static const tools::CommandSpec spec = BenchSpec();
  absl::StatusOr<tools::ParsedFlags> parsed = tools::ParseFlags(spec, args);
  if (!parsed.ok()) return parsed.status();
  ParsedCommandLine result;
  if (parsed->help()) {
    result.help = true;
    return result;
  }
  const tools::ParsedFlags& flags = *parsed;
  BenchOptions& o = result.options;

  o.native = flags.GetBool("native");
  o.dir = flags.Get("dir");
  o.meta_address = flags.Get("meta");
  o.baseline_dir = flags.Get("baseline");
  if (o.native) {
    if (o.meta_address.empty()) return Usage("--native needs --meta HOST:PORT");
    if (o.dir.empty()) o.dir = "/";
  } else {
    if (o.dir.empty()) return Usage("missing --dir DIR (or --native --meta HOST:PORT)");
    if (!o.meta_address.empty()) return Usage("--meta is only used with --native");
  }

  absl::StatusOr<WorkloadKind> kind = ParseWorkloadKind(flags.Get("workload"));
  if (!kind.ok()) return Usage(absl::StrCat("--workload: ", kind.status().message()));
  o.preset = flags.Get("preset");
  if (!o.preset.empty()) {
    if (flags.Given("ranks") || flags.Given("size")) {
      return Usage("--preset fixes ranks and size; drop --ranks/--size or --preset");
    }
    if (flags.Given("scale")) {
      if (!absl::SimpleAtod(flags.Get("scale"), &o.scale) || !(o.scale > 0 && o.scale <= 1)) {
        return Usage(absl::StrCat("--scale must be in (0, 1], got \"", flags.Get("scale"), "\""));
      }
    }
    absl::StatusOr<WorkloadSpec> from_preset = SpecFromPreset(o.preset, o.scale, *kind);
    if (!from_preset.ok()) return Usage(absl::StrCat("--preset: ", from_preset.status().message()));
    o.spec = *from_preset;
  } else {
    if (flags.Given("scale")) return Usage("--scale only applies to --preset");
    o.spec.kind = *kind;
    if (flags.Given("ranks")) {
      absl::StatusOr<int64_t> ranks = flags.GetInt("ranks", 1, 65536);
      if (!ranks.ok()) return Usage(ranks.status().message());
      o.spec.ranks = static_cast<int>(*ranks);
    }
    if (flags.Given("size")) {
      absl::StatusOr<uint64_t> size = SizeFlag(flags, "size");
      if (!size.ok()) return size.status();
      o.spec.bytes_per_rank = *size;
    }
  }
  absl::StatusOr<uint64_t> io_size = SizeFlag(flags, "io-size");
  if (!io_size.ok()) return io_size.status();
  if (*io_size > (uint64_t{1} << 30)) return Usage("--io-size must be at most 1G");
  o.spec.io_size = static_cast<uint32_t>(*io_size);
  absl::StatusOr<uint64_t> tensor = SizeFlag(flags, "tensor-size");
  if (!tensor.ok()) return tensor.status();
  o.spec.tensor_bytes = *tensor;
  if (flags.Given("max-write")) {
    absl::StatusOr<uint64_t> max_write = SizeFlag(flags, "max-write");
    if (!max_write.ok()) return max_write.status();
    o.spec.max_write_bytes = *max_write;
  }
  absl::StatusOr<int64_t> seed = flags.GetInt("seed", 0, INT64_MAX);
  if (!seed.ok()) return Usage(seed.status().message());
  o.spec.seed = static_cast<uint64_t>(*seed);

  if (absl::Status valid = ValidateSpec(o.spec); !valid.ok()) return Usage(valid.message());

  absl::StatusOr<std::vector<Phase>> phases = ParsePhases(flags.Get("phases"));
  if (!phases.ok()) return Usage(absl::StrCat("--phases: ", phases.status().message()));
  o.phases = *phases;
  absl::StatusOr<int64_t> repeat = flags.GetInt("repeat", 1, 1000);
  if (!repeat.ok()) return Usage(repeat.status().message());
  o.repeat = static_cast<int>(*repeat);
  absl::StatusOr<int64_t> threads = flags.GetInt("threads", 1, 65536);
  if (!threads.ok()) return Usage(threads.status().message());
  o.threads = static_cast<int>(*threads);
  absl::StatusOr<int64_t> phase_timeout = flags.GetInt("phase-timeout", 0, 1'000'000);
  if (!phase_timeout.ok()) return Usage(phase_timeout.status().message());
  o.phase_timeout_s = static_cast<int>(*phase_timeout);
  absl::StatusOr<int64_t> commit_timeout = flags.GetInt("commit-timeout", 0, 1'000'000);
  if (!commit_timeout.ok()) return Usage(commit_timeout.status().message());
  o.commit_timeout_s = static_cast<int>(*commit_timeout);

  const std::string commit = flags.Get("commit");
  if (commit == "auto")
    o.commit = CommitMode::kAuto;
  else if (commit == "on")
    o.commit = CommitMode::kOn;
  else if (commit == "off")
    o.commit = CommitMode::kOff;
  else
    return Usage(absl::StrCat("--commit must be auto, on or off, got \"", commit, "\""));
  const std::string progress = flags.Get("progress");
  if (progress == "auto")
    o.progress = ProgressMode::kAuto;
  else if (progress == "on")
    o.progress = ProgressMode::kOn;
  else if (progress == "off")
    o.progress = ProgressMode::kOff;
  else
    return Usage(absl::StrCat("--progress must be auto, on or off, got \"", progress, "\""));

  o.target_procs_given = flags.Given("target-procs");
  for (absl::string_view item : absl::StrSplit(flags.Get("target-procs"), ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) o.target_procs.emplace_back(item);
  }
  o.disk = flags.Get("disk");
  if (flags.Given("disk") && (o.disk.empty() || o.disk == "." || o.disk == ".." ||
                              o.disk.find_first_of("/ \t") != std::string::npos)) {
    return Usage(
        absl::StrCat("--disk takes a device name as /proc/diskstats lists it (\"vda\", "
                     "\"nvme0n1\") or \"none\", got \"",
                     o.disk, "\""));
  }
  o.json_path = flags.Get("json");
  o.plot_path = flags.Get("plot");
  return result;
}

std::string HelpText() {
  return R"(usage: ckptfs-bench --dir DIR [--baseline DIR2] [options]
       ckptfs-bench --native --meta HOST:PORT [--dir PATH] [options]

Reproduces a checkpoint save storm and load storm: N ranks write their
shards at once, commit, then read them back (each its own, then all rank
0's), and reports what a training job would see. With --baseline the same
storm runs against a second directory, alternating A B A B, and the median
per-repeat ratio A/B of every figure is printed first.

Targets:
  --dir DIR               Target A. Each rank is a separate process doing
                          POSIX I/O under DIR (any mounted filesystem:
                          ckptfs, local disk, NFS, another FUSE mount).
                          With --native: the path inside ckptfs (default /).
  --native                Ranks are threads sharing one libckptfs client (no
                          FUSE), so one machine can stand in for thousands.
  --meta HOST:PORT        The ckptfs metadata service, for --native.
  --baseline DIR          Target B, a mounted directory, same storm.
  --threads N             --native: threads running rank tasks (default 64;
                          the commit barrier uses one per rank).

Workload (what each rank writes; every byte read back is verified):
  --workload KIND         raw: 1 MiB write() calls, fsync, close (default);
                          torch: torch.save's zip pattern, no fsync;
                          dcp: torch.distributed.checkpoint's __R_0.distcp
                          files fsynced, then rank 0's .metadata sequence.
  --ranks N               Number of ranks (default 8).
  --size SIZE             Bytes per rank (default 64M). Sizes take K, M, G, T
                          (powers of 1024): 512K, 64M, 1.5G.
  --io-size SIZE          Size of each write()/read() call (default 1M).
  --tensor-size SIZE      torch/dcp: size of each tensor storage (default 64M).
  --max-write SIZE        torch/dcp: cap each write at SIZE (default: one
                          write per storage, as torch does, which needs a
                          storage-sized buffer per rank in flight; cap it
                          for thousands of --native ranks).
  --preset NAME           MLPerf Storage v2.0 checkpoint shape instead of
                          --ranks/--size: llama3-8b (8 ranks, 105 GB) or
                          llama3-70b (64 ranks, 912 GB).
  --scale F               Shrink the preset to F of its bytes, 0 < F <= 1.
  --seed N                Seed of the data pattern (default 1).

Phases:
  --phases LIST           Any of save,commit,load,bcast (default all):
                          save   caches synced and dropped (root only),
                                 every rank writes its shard (fsync per the
                                 workload); dcp's rank 0 then finishes.
                          commit ckptfs's barrier: the step directory is
                                 declared with user.ckptfs.ranks=N before the
                                 save; then every rank commits and waits until
                                 all have: through a mount with getxattr
                                 user.ckptfs.commit.R (a setxattr holds the
                                 directory's lock, so the ranks of one mount
                                 would queue), with --native by setting
                                 user.ckptfs.commit=R.
                          load   caches dropped (root only), every rank reads
                                 back its own shard.
                          bcast  caches dropped, every rank reads rank 0's.
                          Without save, a save still runs (unreported) so
                          the other phases have data.
  --repeat N              Repeats (default 3). Each uses a fresh step
                          directory, removed afterwards.
  --commit MODE           auto (default): on when the target is ckptfs and
                          its barrier answers, off elsewhere; on; off.
  --commit-timeout S      The barrier's timeout for the bench's checkpoints
                          (user.ckptfs.commit_timeout_s on their parent);
                          0 (default): the service's.
  --phase-timeout S       --dir targets: ranks still running S seconds into
                          a phase are killed and the run fails naming them
                          (default 0: no limit).

Figures (per phase, per repeat; medians in the summary): aggregate GB/s =
bytes / (last rank end - first rank start); MLPerf Storage duration (the
slowest rank) and throughput (bytes / duration); p50/p99 rank time; commit
latency p50/p99/max and release (last arrival -> last return); time to
first byte on load; CPU seconds per GiB of the ranks (and the kernel's
share of it: a plain directory's write path) and of the target's
processes; bytes verified; how busy one disk was and what it wrote (save)
or read (loads), per second of the storm. 1 GB = 1e9 bytes.

  --target-procs LIST     Target processes whose CPU time is counted, by
                          name or pid, comma-separated. Default on ckptfs:
                          the cluster serving the target, found by command
                          line (the ckptfs-fuse of the mount, the
                          ckptfs-meta and ckptfs-storage of its metadata
                          address); failing that, every ckptfs-fuse,
                          ckptfs-storage and ckptfs-meta on this machine.
  --disk NAME             The block device reported on (as /proc/diskstats
                          names it: vda, nvme0n1, md0), or none. Default:
                          the one holding --baseline, else --dir's. Busy
                          is time with a request in flight (an SSD can do
                          more at 100%). A target that stores its bytes
                          on this disk and saves faster than the disk's
                          write GB/s left the rest in memory; when both
                          targets' bytes go through it at the rate of the
                          storm, A/B compares two users of one disk. A
                          --disk name /proc/diskstats lacks is an error.

Output:
  --progress MODE         Progress bar on stderr: auto (when a terminal,
                          default), on, off.
  --json FILE             Every figure, per repeat and medians, and every
                          rank's timeline, as JSON.
  --plot FILE.svg         SVG: per-rank timelines (a bar per phase) and
                          aggregate throughput over time.

Examples:
  # ckptfs against a plain directory on the same disk, default storm:
  ckptfs-bench --dir /checkpoints/bench --baseline /var/tmp/bench
  # DCP pattern shaped like MLPerf's llama3-8b, shrunk to 1%:
  ckptfs-bench --dir /checkpoints --workload dcp --preset llama3-8b --scale 0.01
  # 4096 ranks of 1 MiB through libckptfs, commit barrier only:
  ckptfs-bench --native --meta 127.0.0.1:7000 --ranks 4096 --size 1M \
      --phases save,commit --json out.json --plot out.svg

Exit status: 0 success, 1 failure (a rank failed or died, a full disk,
verification failed), 2 usage error.
)";
}

}  // namespace ckptfs::bench
