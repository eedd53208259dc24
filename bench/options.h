// The command line of ckptfs-bench: flags, their validation, and --help.
//
// Parsing is done by the `ckptfs` tool's flag parser (tools/flags.h): flags
// are written --flag VALUE or --flag=VALUE; unknown, repeated or malformed
// flags are usage errors (InvalidArgument with a one-line message).
// Thread-safe (pure functions).
#ifndef CKPTFS_BENCH_OPTIONS_H_
#define CKPTFS_BENCH_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/phase.h"
#include "bench/workload.h"

namespace ckptfs::bench {

enum class CommitMode { kAuto, kOn, kOff };
enum class ProgressMode { kAuto, kOn, kOff };

struct BenchOptions {
  // Target A: a mounted directory (ranks are processes), or with `native`
  // libckptfs at `meta_address` (ranks are threads; `dir` is then the path
  // inside ckptfs, "/" by default).
  std::string dir;
  bool native = false;
  std::string meta_address;
  // Target B (empty: none): always a mounted directory.
  std::string baseline_dir;

  WorkloadSpec spec;
  std::string preset;  // "" or a preset name; `spec` already reflects it
  double scale = 1.0;

  std::vector<Phase> phases;
  int repeat = 3;
  CommitMode commit = CommitMode::kAuto;
  // --native: rank tasks run on this many threads (all ranks at once for
  // the commit barrier).
  int threads = 64;
  // --dir ranks still running this long into a phase are killed and the
  // run fails naming them; 0: no limit.
  int phase_timeout_s = 0;
  // The commit barrier's timeout for the bench's checkpoints; 0: the
  // service's default.
  int commit_timeout_s = 0;
  // Names or pids of the target's own processes; empty with
  // `target_procs_given` false: the ckptfs daemons when the target is ckptfs.
  std::vector<std::string> target_procs;
  bool target_procs_given = false;

  // The block device whose busy time and bytes are reported per phase
  // (bench/disk.h): a name from /proc/diskstats; "" picks the one
  // holding the baseline (else --dir); "none" measures none.
  std::string disk;

  std::string json_path;  // "" = none
  std::string plot_path;  // "" = none
  ProgressMode progress = ProgressMode::kAuto;
};

// The outcome of parsing: either help was asked for, or options.
struct ParsedCommandLine {
  bool help = false;
  BenchOptions options;
};

// Parses the arguments after the program name. InvalidArgument with a
// message for people on a usage error.
absl::StatusOr<ParsedCommandLine> ParseCommandLine(const std::vector<std::string>& args);

// "64M" -> 64 MiB. Suffixes K, M, G, T (powers of 1024), optionally
// followed by "iB" or "B"; a fraction is allowed with a suffix ("1.5G").
// InvalidArgument otherwise, or for 0.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// The --help text: every option, its default, and examples.
std::string HelpText();

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_OPTIONS_H_
