// The --plot picture of ckptfs-bench, as SVG: on top, one row per rank with
// a bar per phase it ran (colour = phase; baseline B drawn lighter), with the
// target and repeat written above each span; below, the aggregate
// throughput over time (GB/s over ~100 ms of progress samples), on the
// same time axis. Each rank's bars are one <g class="rank" id="rank-R">.
//
// Thread-safety: pure function.
#ifndef CKPTFS_BENCH_SVG_PLOT_H_
#define CKPTFS_BENCH_SVG_PLOT_H_

#include <string>

#include "bench/runner.h"

namespace ckptfs::bench {

// `title` goes on top (e.g. the workload).
std::string RenderSvg(const BenchResult& result, int ranks, const std::string& title);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_SVG_PLOT_H_
