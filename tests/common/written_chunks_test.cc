// ChunkRanges and a file's WrittenChunks record (common/written_chunks.h):
// ranges stay sorted, disjoint and merged; cuts, the cap and the untracked
// state behave as the metadata service relies on.
#include "common/written_chunks.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace ckptfs {
namespace {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

google::protobuf::RepeatedPtrField<meta::ChunkRange> Proto(const Ranges& ranges) {
  google::protobuf::RepeatedPtrField<meta::ChunkRange> out;
  for (const auto& [first, end] : ranges) {
    meta::ChunkRange* range = out.Add();
    range->set_first(first);
    range->set_end(end);
  }
  return out;
}

Ranges Of(const meta::WrittenChunks& written) {
  Ranges out;
  for (const meta::ChunkRange& range : written.ranges()) {
    out.emplace_back(range.first(), range.end());
  }
  return out;
}

TEST(ChunkRangesTest, SequentialChunksMakeOneRange) {
  ChunkRanges ranges;
  for (uint64_t i = 0; i < 1000; ++i) ranges.Add(i, i + 1);
  EXPECT_EQ(ranges.ranges(), (Ranges{{0, 1000}}));
}

TEST(ChunkRangesTest, AddMergesOverlappingAndTouchingRangesOnly) {
  ChunkRanges ranges;
  ranges.Add(10, 12);
  ranges.Add(0, 2);
  ranges.Add(5, 6);
  EXPECT_EQ(ranges.ranges(), (Ranges{{0, 2}, {5, 6}, {10, 12}}));
  ranges.Add(2, 3);  // touches [0, 2)
  EXPECT_EQ(ranges.ranges(), (Ranges{{0, 3}, {5, 6}, {10, 12}}));
  ranges.Add(4, 11);  // swallows [5, 6) and joins [10, 12)
  EXPECT_EQ(ranges.ranges(), (Ranges{{0, 3}, {4, 12}}));
  ranges.Add(3, 4);  // fills the gap
  EXPECT_EQ(ranges.ranges(), (Ranges{{0, 12}}));
  ranges.Add(7, 7);  // empty
  ranges.Add(9, 3);  // backwards
  EXPECT_EQ(ranges.ranges(), (Ranges{{0, 12}}));
}

TEST(ChunkRangesTest, ContainsAndCutAt) {
  ChunkRanges ranges;
  ranges.Add(0, 1);
  ranges.Add(3, 5);
  ranges.Add(8, 20);
  EXPECT_TRUE(ranges.Contains(0));
  EXPECT_FALSE(ranges.Contains(1));
  EXPECT_FALSE(ranges.Contains(2));
  EXPECT_TRUE(ranges.Contains(3));
  EXPECT_TRUE(ranges.Contains(4));
  EXPECT_FALSE(ranges.Contains(5));
  EXPECT_TRUE(ranges.Contains(19));
  EXPECT_FALSE(ranges.Contains(20));
  ranges.CutAt(10);
  EXPECT_EQ(ranges.ranges(), (Ranges{{0, 1}, {3, 5}, {8, 10}}));
  ranges.CutAt(4);
  EXPECT_EQ(ranges.ranges(), (Ranges{{0, 1}, {3, 4}}));
  ranges.CutAt(2);
  EXPECT_EQ(ranges.ranges(), (Ranges{{0, 1}}));
  ranges.CutAt(0);
  EXPECT_TRUE(ranges.empty());
}

TEST(ChunkRangesTest, ChunksCoveringRoundsUp) {
  EXPECT_EQ(ChunksCovering(0, 64), 0u);
  EXPECT_EQ(ChunksCovering(1, 64), 1u);
  EXPECT_EQ(ChunksCovering(64, 64), 1u);
  EXPECT_EQ(ChunksCovering(65, 64), 2u);
}

TEST(WrittenChunksTest, AFileFromBeforeTrackingStaysUnknown) {
  meta::WrittenChunks written;  // as stored for an old file: unset
  MergeWritten(written, Proto({{0, 4}}), false, 10);
  EXPECT_FALSE(written.known());
  EXPECT_FALSE(IsWritten(written, 1));
  TruncateWritten(written, 100, 64);
  EXPECT_FALSE(written.known());
  TruncateWritten(written, 0, 64);  // a truncation to 0 starts tracking
  EXPECT_TRUE(written.known());
  EXPECT_TRUE(written.ranges().empty());
}

TEST(WrittenChunksTest, MergeAddsRangesCutToTheFileSize) {
  meta::WrittenChunks written;
  ResetWritten(written);
  MergeWritten(written, Proto({{0, 2}, {5, 6}}), false, 10);
  MergeWritten(written, Proto({{2, 3}, {9, 14}}), false, 10);  // past 10: a stale index
  EXPECT_EQ(Of(written), (Ranges{{0, 3}, {5, 6}, {9, 10}}));
  EXPECT_TRUE(IsWritten(written, 2));
  EXPECT_FALSE(IsWritten(written, 3));
  EXPECT_TRUE(IsWritten(written, 5));
  EXPECT_TRUE(IsWritten(written, 9));
  EXPECT_FALSE(IsWritten(written, 10));
}

TEST(WrittenChunksTest, TruncateKeepsTheCutChunkAndAddsNoneWhenExtending) {
  meta::WrittenChunks written;
  ResetWritten(written);
  MergeWritten(written, Proto({{0, 8}}), false, 8);
  TruncateWritten(written, 3 * 64 + 10, 64);  // mid chunk 3: it keeps bytes
  EXPECT_EQ(Of(written), (Ranges{{0, 4}}));
  TruncateWritten(written, 2 * 64, 64);  // at a chunk boundary
  EXPECT_EQ(Of(written), (Ranges{{0, 2}}));
  TruncateWritten(written, 100 * 64, 64);  // extending: holes
  EXPECT_EQ(Of(written), (Ranges{{0, 2}}));
  EXPECT_FALSE(IsWritten(written, 50));
}

TEST(WrittenChunksTest, PastTheCapOrWhenTheWriterLostCountTheFileIsUntracked) {
  meta::WrittenChunks written;
  ResetWritten(written);
  Ranges scattered;
  for (uint64_t i = 0; i < kMaxWrittenRanges; ++i) scattered.emplace_back(2 * i, 2 * i + 1);
  MergeWritten(written, Proto(scattered), false, 1 << 20);
  EXPECT_TRUE(written.known());
  EXPECT_EQ(static_cast<size_t>(written.ranges_size()), kMaxWrittenRanges);
  MergeWritten(written, Proto({{2 * kMaxWrittenRanges + 5, 2 * kMaxWrittenRanges + 6}}), false,
               1 << 20);
  EXPECT_FALSE(written.known());
  EXPECT_EQ(written.ranges_size(), 0);
  EXPECT_FALSE(IsWritten(written, 0));

  ResetWritten(written);
  MergeWritten(written, Proto({{0, 1}}), false, 10);
  MergeWritten(written, Proto({}), true, 10);
  EXPECT_FALSE(written.known());
}

}  // namespace
}  // namespace ckptfs
