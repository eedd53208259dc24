// See progress.h.
#include "bench/progress.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/table.h"

namespace ckptfs::bench {
namespace {

void WriteStderr(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void ProgressMeter::BeginPhase(const std::string& target, int repeat, int repeats, Phase phase,
                               uint64_t expected_bytes, int ranks, int64_t now_ns) {
  repeats_ = repeats;
  expected_ = expected_bytes;
  ranks_ = ranks;
  segments_.push_back(ProgressSegment{target, repeat, phase, now_ns});
  points_.push_back(ProgressPoint{static_cast<int>(segments_.size()) - 1, now_ns, 0});
  last_draw_ns_ = 0;
  Draw(now_ns, 0, 0);
}

void ProgressMeter::Sample(int64_t now_ns, uint64_t bytes, int ranks_done) {
  if (segments_.empty()) return;
  points_.push_back(ProgressPoint{static_cast<int>(segments_.size()) - 1, now_ns, bytes});
  if (now_ns - last_draw_ns_ >= 100'000'000) Draw(now_ns, bytes, ranks_done);
}

void ProgressMeter::EndPhase() { Clear(); }

void ProgressMeter::Note(const std::string& line) {
  Clear();
  WriteStderr(line + "\n");
}

void ProgressMeter::Draw(int64_t now_ns, uint64_t bytes, int ranks_done) {
  if (!draw_ || segments_.empty()) return;
  last_draw_ns_ = now_ns;
  const ProgressSegment& s = segments_.back();
  const double elapsed = static_cast<double>(now_ns - s.start_ns) / 1e9;
  std::string line = absl::StrFormat("\r%s %-6s repeat %d/%d  ", s.target, PhaseName(s.phase),
                                     s.repeat + 1, repeats_);
  if (expected_ > 0) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(
        std::min<double>(1.0, static_cast<double>(bytes) / static_cast<double>(expected_)) *
        kWidth);
    absl::StrAppend(&line, "[", std::string(filled, '#'), std::string(kWidth - filled, '.'), "]  ",
                    tools::FormatBytes(bytes), " / ", tools::FormatBytes(expected_));
    if (elapsed > 0) {
      absl::StrAppend(&line,
                      absl::StrFormat("  %.2f GB/s", static_cast<double>(bytes) / elapsed / 1e9));
    }
  } else {
    absl::StrAppend(&line, absl::StrFormat("waiting %.1f s", elapsed));
  }
  absl::StrAppend(&line, "  ", ranks_done, "/", ranks_, " ranks done");
  absl::StrAppend(&line, "\x1b[K");
  WriteStderr(line);
  drawn_ = true;
}

void ProgressMeter::Clear() {
  if (!drawn_) return;
  WriteStderr("\r\x1b[K");
  drawn_ = false;
}

}  // namespace ckptfs::bench
