// ProgressMeter: the progress bar of ckptfs-bench and the throughput samples
// the plot draws.
//
// Each phase of each repeat is one segment; Sample records the bytes the
// phase has moved so far (about every 50 ms) and, when drawing, redraws one
// line on stderr at most 10 times a second:
//   A save   repeat 2/3  [#########.......]  312.0 MiB / 512.0 MiB  0.45 GB/s  3/8 ranks done
// Notes printed meanwhile clear the bar first.
//
// Thread-safety: not thread-safe; used by the runner's thread.
#ifndef CKPTFS_BENCH_PROGRESS_H_
#define CKPTFS_BENCH_PROGRESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/phase.h"

namespace ckptfs::bench {

struct ProgressSegment {
  std::string target;
  int repeat = 0;
  Phase phase = Phase::kSave;
  int64_t start_ns = 0;
};

struct ProgressPoint {
  int segment = 0;  // index into segments()
  int64_t t_ns = 0;
  uint64_t bytes = 0;  // moved in the segment so far
};

class ProgressMeter {
 public:
  // `draw`: show the bar on stderr (normally: stderr is a terminal).
  explicit ProgressMeter(bool draw) : draw_(draw) {}

  // `ranks`: how many ranks the phase runs.
  void BeginPhase(const std::string& target, int repeat, int repeats, Phase phase,
                  uint64_t expected_bytes, int ranks, int64_t now_ns);
  void Sample(int64_t now_ns, uint64_t bytes, int ranks_done);
  // Clears the bar.
  void EndPhase();
  // Prints `line` on stderr (always), keeping the bar intact.
  void Note(const std::string& line);

  const std::vector<ProgressSegment>& segments() const { return segments_; }
  const std::vector<ProgressPoint>& points() const { return points_; }

 private:
  void Draw(int64_t now_ns, uint64_t bytes, int ranks_done);
  void Clear();

  bool draw_;
  bool drawn_ = false;
  int repeats_ = 0;
  uint64_t expected_ = 0;
  int ranks_ = 0;
  int64_t last_draw_ns_ = 0;
  std::vector<ProgressSegment> segments_;
  std::vector<ProgressPoint> points_;
};

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_PROGRESS_H_
