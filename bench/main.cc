// ckptfs-bench: reproduces checkpoint save storms and load storms against
// ckptfs or any mounted directory, and compares two targets side by side.
// See `ckptfs-bench --help` (options.cc) for the options and figures.
// Exit status: 0 success, 1 failure, 2 usage error.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/interrupt.h"
#include "bench/options.h"
#include "bench/progress.h"
#include "bench/report_json.h"
#include "bench/runner.h"
#include "bench/summary.h"
#include "bench/svg_plot.h"

namespace ckptfs::bench {
namespace {

// Thousands of rank processes each hold a pipe here.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int Main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<ParsedCommandLine> parsed = ParseCommandLine(args);
  if (!parsed.ok()) {
    std::cerr << "ckptfs-bench: " << parsed.status().message()
              << "\n(ckptfs-bench --help explains every option)\n";
    return 2;
  }
  if (parsed->help) {
    std::cout << HelpText();
    return 0;
  }
  const BenchOptions& options = parsed->options;
  RaiseOpenFileLimit();
  InstallInterruptHandlers();

  const bool draw = options.progress == ProgressMode::kOn ||
                    (options.progress == ProgressMode::kAuto && ::isatty(STDERR_FILENO));
  ProgressMeter progress(draw);
  absl::StatusOr<BenchResult> result = RunBench(options, progress);
  if (!result.ok()) {
    std::cerr << "ckptfs-bench: " << result.status().message() << "\n";
    return InterruptRequested() ? 130 : 1;
  }
  std::cout << FormatSummary(options, *result) << std::flush;

  int status = 0;
  if (!options.json_path.empty()) {
    absl::Status written = WriteTextFile(options.json_path, BenchJson(options, *result));
    if (!written.ok()) {
      std::cerr << "ckptfs-bench: --json: " << written.message() << "\n";
      status = 1;
    }
  }
  if (!options.plot_path.empty()) {
    const std::string title = absl::StrCat(
        "ckptfs-bench ", WorkloadKindName(options.spec.kind), ", ", options.spec.ranks,
        " ranks; A = ", result->targets[0].root,
        result->targets.size() > 1 ? absl::StrCat(", B = ", result->targets[1].root) : "");
    absl::Status written =
        WriteTextFile(options.plot_path, RenderSvg(*result, options.spec.ranks, title));
    if (!written.ok()) {
      std::cerr << "ckptfs-bench: --plot: " << written.message() << "\n";
      status = 1;
    }
  }
  return status;
}

}  // namespace
}  // namespace ckptfs::bench

int main(int argc, char** argv) { return ckptfs::bench::Main(argc, argv); }
