// See written_chunks.h.
#include "common/written_chunks.h"

#include <algorithm>

namespace ckptfs {

ChunkRanges::ChunkRanges(const google::protobuf::RepeatedPtrField<meta::ChunkRange>& ranges) {
  for (const meta::ChunkRange& range : ranges) Add(range.first(), range.end());
}

void ChunkRanges::Add(uint64_t first, uint64_t end) {
  if (end <= first) return;
  // The first range that ends at or after `first` (touching merges too).
  auto lo = std::lower_bound(
      ranges_.begin(), ranges_.end(), first,
      [](const std::pair<uint64_t, uint64_t>& r, uint64_t at) { return r.second < at; });
  // Past the last range that starts at or before `end`.
  auto hi = lo;
  while (hi != ranges_.end() && hi->first <= end) ++hi;
  if (lo == hi) {
    ranges_.insert(lo, {first, end});
    return;
  }
  const uint64_t merged_first = std::min(first, lo->first);
  const uint64_t merged_end = std::max(end, (hi - 1)->second);
  *lo = {merged_first, merged_end};
  ranges_.erase(lo + 1, hi);
}

void ChunkRanges::Add(const ChunkRanges& other) {
  for (const auto& [first, end] : other.ranges_) Add(first, end);
}

void ChunkRanges::CutAt(uint64_t end) {
  while (!ranges_.empty() && ranges_.back().first >= end) ranges_.pop_back();
  if (!ranges_.empty() && ranges_.back().second > end) ranges_.back().second = end;
}

bool ChunkRanges::Contains(uint64_t index) const {
  auto it = std::upper_bound(
      ranges_.begin(), ranges_.end(), index,
      [](uint64_t at, const std::pair<uint64_t, uint64_t>& r) { return at < r.first; });
  if (it == ranges_.begin()) return false;
  --it;
  return index < it->second;
}

void ChunkRanges::AppendTo(google::protobuf::RepeatedPtrField<meta::ChunkRange>* out) const {
  for (const auto& [first, end] : ranges_) {
    meta::ChunkRange* range = out->Add();
    range->set_first(first);
    range->set_end(end);
  }
}

uint64_t ChunksCovering(uint64_t size, uint32_t chunk_size) {
  if (chunk_size == 0) return 0;
  return size / chunk_size + (size % chunk_size != 0 ? 1 : 0);
}

void ResetWritten(meta::WrittenChunks& written) {
  written.Clear();
  written.set_known(true);
}

void MergeWritten(meta::WrittenChunks& written,
                  const google::protobuf::RepeatedPtrField<meta::ChunkRange>& added, bool untracked,
                  uint64_t chunk_limit) {
  if (!written.known()) return;
  if (untracked) {
    written.Clear();  // known = false: missing chunks read as holes
    return;
  }
  if (added.empty()) return;
  ChunkRanges ranges(written.ranges());
  for (const meta::ChunkRange& range : added) {
    ranges.Add(range.first(), std::min(range.end(), chunk_limit));
  }
  written.clear_ranges();
  if (ranges.range_count() > kMaxWrittenRanges) {
    written.set_known(false);
    return;
  }
  ranges.AppendTo(written.mutable_ranges());
}

void TruncateWritten(meta::WrittenChunks& written, uint64_t size, uint32_t chunk_size) {
  if (size == 0) {
    ResetWritten(written);
    return;
  }
  if (!written.known()) return;
  ChunkRanges ranges(written.ranges());
  ranges.CutAt(ChunksCovering(size, chunk_size));
  written.clear_ranges();
  ranges.AppendTo(written.mutable_ranges());
}

bool IsWritten(const meta::WrittenChunks& written, uint64_t index) {
  if (!written.known()) return false;
  // Stored ranges are sorted and disjoint: binary search them in place.
  const auto& ranges = written.ranges();
  auto it = std::upper_bound(ranges.begin(), ranges.end(), index,
                             [](uint64_t at, const meta::ChunkRange& r) { return at < r.first(); });
  if (it == ranges.begin()) return false;
  --it;
  return index < it->end();
}

}  // namespace ckptfs
