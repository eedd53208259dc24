// Layout math: chunk index/offset, per-chunk split of a range, the servers
// of a chunk's copies (placement), chunk length within a file — at the
// edges that break off-by-ones.
#include "client/layout.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace ckptfs::client {
namespace {

constexpr uint32_t kChunk = 64 * 1024;

TEST(LayoutTest, IndexAndOffsetAtEdges) {
  EXPECT_EQ(ChunkIndexOf(0, kChunk), 0u);
  EXPECT_EQ(OffsetInChunk(0, kChunk), 0u);
  EXPECT_EQ(ChunkIndexOf(1, kChunk), 0u);
  EXPECT_EQ(OffsetInChunk(1, kChunk), 1u);
  EXPECT_EQ(ChunkIndexOf(kChunk - 1, kChunk), 0u);
  EXPECT_EQ(OffsetInChunk(kChunk - 1, kChunk), kChunk - 1);
  EXPECT_EQ(ChunkIndexOf(kChunk, kChunk), 1u);
  EXPECT_EQ(OffsetInChunk(kChunk, kChunk), 0u);
  EXPECT_EQ(ChunkIndexOf(kChunk + 1, kChunk), 1u);
  EXPECT_EQ(OffsetInChunk(kChunk + 1, kChunk), 1u);
  EXPECT_EQ(ChunkIndexOf(3ull * kChunk + 17, kChunk), 3u);
  EXPECT_EQ(OffsetInChunk(3ull * kChunk + 17, kChunk), 17u);
  EXPECT_EQ(ChunkStart(3, kChunk), 3ull * kChunk);
}

TEST(LayoutTest, HugeOffsetsDoNotOverflow) {
  const uint32_t chunk = 4u << 20;
  const uint64_t offset = (uint64_t{1} << 50) + 12345;  // 1 PiB + a bit
  EXPECT_EQ(ChunkIndexOf(offset, chunk), (uint64_t{1} << 50) / chunk);
  EXPECT_EQ(OffsetInChunk(offset, chunk), 12345u);
  EXPECT_EQ(ChunkStart(ChunkIndexOf(offset, chunk), chunk) + OffsetInChunk(offset, chunk), offset);
  auto pieces = SplitRange(offset - 10, 20, chunk);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].offset_in_chunk, 12335u);
  const uint64_t at_boundary = ChunkStart(uint64_t{1} << 33, chunk);  // > 2^32 chunks in
  pieces = SplitRange(at_boundary - 5, 10, chunk);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].chunk_index, (uint64_t{1} << 33) - 1);
  EXPECT_EQ(pieces[0].length, 5u);
  EXPECT_EQ(pieces[1].chunk_index, uint64_t{1} << 33);
  EXPECT_EQ(pieces[1].offset_in_chunk, 0u);
  EXPECT_EQ(pieces[1].range_offset, 5u);
}

TEST(LayoutTest, ChunkLengthInFile) {
  EXPECT_EQ(ChunkLengthInFile(0, kChunk, 0), 0u);
  EXPECT_EQ(ChunkLengthInFile(0, kChunk, 1), 1u);
  EXPECT_EQ(ChunkLengthInFile(0, kChunk, kChunk - 1), kChunk - 1);
  EXPECT_EQ(ChunkLengthInFile(0, kChunk, kChunk), kChunk);
  EXPECT_EQ(ChunkLengthInFile(1, kChunk, kChunk), 0u);
  EXPECT_EQ(ChunkLengthInFile(0, kChunk, kChunk + 1), kChunk);
  EXPECT_EQ(ChunkLengthInFile(1, kChunk, kChunk + 1), 1u);
  EXPECT_EQ(ChunkLengthInFile(3, kChunk, 3ull * kChunk + 17), 17u);
  EXPECT_EQ(ChunkLengthInFile(2, kChunk, 3ull * kChunk + 17), kChunk);
  EXPECT_EQ(ChunkLengthInFile(4, kChunk, 3ull * kChunk + 17), 0u);
}

TEST(LayoutTest, ChunkCount) {
  EXPECT_EQ(ChunkCount(0, kChunk), 0u);
  EXPECT_EQ(ChunkCount(1, kChunk), 1u);
  EXPECT_EQ(ChunkCount(kChunk - 1, kChunk), 1u);
  EXPECT_EQ(ChunkCount(kChunk, kChunk), 1u);
  EXPECT_EQ(ChunkCount(kChunk + 1, kChunk), 2u);
  EXPECT_EQ(ChunkCount(3ull * kChunk + 17, kChunk), 4u);
}

TEST(LayoutTest, SplitEmptyRange) { EXPECT_TRUE(SplitRange(12345, 0, kChunk).empty()); }

TEST(LayoutTest, SplitWithinOneChunk) {
  auto pieces = SplitRange(10, 100, kChunk);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0], (ChunkPiece{0, 10, 100, 0}));
  pieces = SplitRange(0, kChunk, kChunk);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0], (ChunkPiece{0, 0, kChunk, 0}));
}

TEST(LayoutTest, SplitAcrossBoundaries) {
  // Starts one byte before chunk 1, ends 17 bytes into chunk 3.
  auto pieces = SplitRange(kChunk - 1, 1 + 2ull * kChunk + 17, kChunk);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[0], (ChunkPiece{0, kChunk - 1, 1, 0}));
  EXPECT_EQ(pieces[1], (ChunkPiece{1, 0, kChunk, 1}));
  EXPECT_EQ(pieces[2], (ChunkPiece{2, 0, kChunk, 1 + kChunk}));
  EXPECT_EQ(pieces[3], (ChunkPiece{3, 0, 17, 1 + 2ull * kChunk}));
  uint64_t total = 0;
  for (const ChunkPiece& p : pieces) total += p.length;
  EXPECT_EQ(total, 1 + 2ull * kChunk + 17);
}

TEST(LayoutTest, SplitEndsExactlyAtBoundary) {
  auto pieces = SplitRange(kChunk, kChunk, kChunk);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0], (ChunkPiece{1, 0, kChunk, 0}));
  pieces = SplitRange(1, kChunk, kChunk);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1], (ChunkPiece{1, 0, 1, kChunk - 1}));
}

TEST(LayoutTest, ServerForChunkCyclesThroughStripe) {
  meta::Layout layout;
  layout.set_chunk_size(kChunk);
  for (uint32_t id : {7u, 3u, 9u}) layout.add_stripe(id);
  EXPECT_TRUE(ValidateLayout(layout).ok());
  EXPECT_EQ(ServerForChunk(layout, 0), 7u);
  EXPECT_EQ(ServerForChunk(layout, 1), 3u);
  EXPECT_EQ(ServerForChunk(layout, 2), 9u);
  EXPECT_EQ(ServerForChunk(layout, 3), 7u);
  EXPECT_EQ(ServerForChunk(layout, (uint64_t{1} << 40) + 2),
            ServerForChunk(layout, ((uint64_t{1} << 40) + 2) % 3));
}

TEST(LayoutTest, InvalidLayoutsAreRejected) {
  meta::Layout layout;
  layout.set_chunk_size(kChunk);
  EXPECT_FALSE(ValidateLayout(layout).ok());  // no servers
  layout.add_stripe(1);
  layout.set_chunk_size(0);
  EXPECT_FALSE(ValidateLayout(layout).ok());
}

TEST(LayoutTest, ReplicasFollowCopyZeroAlongTheStripe) {
  meta::Layout layout;
  layout.set_chunk_size(kChunk);
  for (uint32_t id : {7u, 3u, 9u, 4u}) layout.add_stripe(id);
  layout.set_replicas(2);
  ASSERT_TRUE(ValidateLayout(layout).ok());
  EXPECT_EQ(ReplicaCount(layout), 2);
  EXPECT_EQ(ReplicaServers(layout, 0), (std::vector<uint32_t>{7, 3}));
  EXPECT_EQ(ReplicaServers(layout, 1), (std::vector<uint32_t>{3, 9}));
  EXPECT_EQ(ReplicaServers(layout, 2), (std::vector<uint32_t>{9, 4}));
  EXPECT_EQ(ReplicaServers(layout, 3), (std::vector<uint32_t>{4, 7}));  // wraps
  EXPECT_EQ(ReplicaServers(layout, 4), (std::vector<uint32_t>{7, 3}));
  // Copy 0 is where a layout without replicas puts the chunk.
  for (uint64_t i = 0; i < 9; ++i) {
    EXPECT_EQ(ServerForChunk(layout, i), ReplicaServers(layout, i)[0]);
  }
  const uint64_t far = (uint64_t{1} << 40) + 3;
  EXPECT_EQ(ReplicaServers(layout, far), (std::vector<uint32_t>{4, 7}));
}

TEST(LayoutTest, EveryCopyOfAChunkIsOnADifferentServer) {
  meta::Layout layout;
  layout.set_chunk_size(kChunk);
  for (uint32_t id : {1u, 2u, 3u}) layout.add_stripe(id);
  layout.set_replicas(3);
  ASSERT_TRUE(ValidateLayout(layout).ok());
  for (uint64_t i = 0; i < 6; ++i) {
    std::vector<uint32_t> servers = ReplicaServers(layout, i);
    std::sort(servers.begin(), servers.end());
    EXPECT_EQ(servers, (std::vector<uint32_t>{1, 2, 3})) << "chunk " << i;
  }
}

TEST(LayoutTest, ZeroOrOneReplicaIsOneCopy) {
  meta::Layout layout;
  layout.set_chunk_size(kChunk);
  for (uint32_t id : {5u, 6u}) layout.add_stripe(id);
  EXPECT_EQ(ReplicaCount(layout), 1);  // an old layout: no replicas field
  EXPECT_EQ(ReplicaServers(layout, 1), (std::vector<uint32_t>{6}));
  layout.set_replicas(1);
  EXPECT_EQ(ReplicaCount(layout), 1);
  EXPECT_EQ(ReplicaServers(layout, 2), (std::vector<uint32_t>{5}));
}

TEST(LayoutTest, MoreReplicasThanServersIsRejected) {
  meta::Layout layout;
  layout.set_chunk_size(kChunk);
  for (uint32_t id : {1u, 2u}) layout.add_stripe(id);
  layout.set_replicas(2);
  EXPECT_TRUE(ValidateLayout(layout).ok());
  layout.set_replicas(3);
  absl::Status status = ValidateLayout(layout);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("3 replicas"), absl::string_view::npos) << status;
}

TEST(LayoutTest, ServersHoldingChunksCoverEveryCopy) {
  meta::Layout layout;
  layout.set_chunk_size(kChunk);
  for (uint32_t id : {7u, 3u, 9u, 4u, 8u}) layout.add_stripe(id);
  EXPECT_TRUE(ServersHoldingChunks(layout, 0).empty());
  EXPECT_EQ(ServersHoldingChunks(layout, 2), (std::vector<uint32_t>{7, 3}));
  layout.set_replicas(2);
  EXPECT_EQ(ServersHoldingChunks(layout, 1), (std::vector<uint32_t>{7, 3}));
  EXPECT_EQ(ServersHoldingChunks(layout, 3), (std::vector<uint32_t>{7, 3, 9, 4}));
  EXPECT_EQ(ServersHoldingChunks(layout, 100), (std::vector<uint32_t>{7, 3, 9, 4, 8}));
  // Brute force: the union of every chunk's copies.
  for (uint64_t chunks = 0; chunks < 8; ++chunks) {
    std::set<uint32_t> expected;
    for (uint64_t i = 0; i < chunks; ++i) {
      for (uint32_t id : ReplicaServers(layout, i)) expected.insert(id);
    }
    std::vector<uint32_t> got = ServersHoldingChunks(layout, chunks);
    EXPECT_EQ(std::set<uint32_t>(got.begin(), got.end()), expected) << chunks << " chunks";
    EXPECT_EQ(got.size(), expected.size());
  }
}

}  // namespace
}  // namespace ckptfs::client
