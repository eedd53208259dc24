// Unit tests of `ckptfs ckpt verify` / `show` on erasure-coded files
// (tools/ckpt_check.h, CheckErasureCodedChunk) over in-memory storage
// servers (client/testing/fake_chunk_transport.h): a whole chunk is good
// and its CRC32C is that of its bytes (as for a replicated file holding
// them), a deleted, corrupt or other-version fragment makes the chunk bad
// naming the fragment and its server, fewer than k is bad, no fragment at
// all is a hole.
#include <string>
#include <vector>

#include "client/fragment_io.h"
#include "client/testing/fake_chunk_transport.h"
#include "common/crc32c.h"
#include "common/placement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/ckpt_check.h"

namespace ckptfs::tools {
namespace {

using client::testing::FakeChunkTransport;
using ::testing::HasSubstr;

constexpr uint32_t kChunk = 64;
constexpr uint64_t kIno = 7;

class EcVerifyTest : public ::testing::Test {
 protected:
  EcVerifyTest() {
    layout_.set_chunk_size(kChunk);
    layout_.set_ec_data(4);
    layout_.set_ec_parity(2);
    for (uint32_t id = 1; id <= 7; ++id) layout_.add_stripe(id);
  }

  // Stores chunk `i` holding `data` (at most kChunk bytes) as a writer would.
  void WriteChunk(uint64_t i, const std::string& data, uint64_t write_id = 99) {
    client::DecodedChunk chunk;
    chunk.length = static_cast<uint32_t>(data.size());
    chunk.write_id = write_id;
    chunk.bytes.assign(data.begin(), data.end());
    chunk.bytes.resize(4 * client::FragmentSize(layout_), '\0');
    const std::vector<uint32_t> servers = ReplicaServers(layout_, i);
    for (int r = 0; r < 6; ++r) {
      const std::vector<char> f = client::EncodeFragment(layout_, chunk, r);
      ASSERT_TRUE(transport_.WriteChunk(servers[r], kIno, i, 0, f.data(), f.size(), true).ok());
    }
  }

  ChunkCheck Check(uint64_t i, uint64_t length, std::string& bytes) {
    return CheckErasureCodedChunk(transport_, layout_, kIno, static_cast<uint32_t>(i), length,
                                  bytes);
  }

  static std::string Data(size_t n, char seed) {
    std::string s(n, '\0');
    for (size_t k = 0; k < n; ++k) s[k] = static_cast<char>(seed + k * 13 % 101);
    return s;
  }

  meta::Layout layout_;
  FakeChunkTransport transport_;
};

TEST_F(EcVerifyTest, WholeChunkIsGoodWithTheCrcOfItsBytes) {
  const std::string data = Data(kChunk, 'a');
  WriteChunk(0, data);
  std::string bytes;
  ChunkCheck chunk = Check(0, kChunk, bytes);
  EXPECT_TRUE(chunk.status.ok()) << chunk.status;
  EXPECT_FALSE(chunk.hole);
  EXPECT_EQ(bytes, data);
  // What a replicated file's check computes over the same bytes read from a copy.
  EXPECT_EQ(chunk.crc32c, Crc32c(data.data(), data.size()));
  EXPECT_EQ(chunk.server_id, ReplicaServer(layout_, 0, 0));
}

TEST_F(EcVerifyTest, ShortLastChunkIsGood) {
  const std::string data = Data(21, 'q');
  WriteChunk(1, data);
  std::string bytes;
  ChunkCheck chunk = Check(1, 21, bytes);
  EXPECT_TRUE(chunk.status.ok()) << chunk.status;
  EXPECT_EQ(bytes, data);
  EXPECT_EQ(chunk.crc32c, Crc32c(data.data(), data.size()));
}

TEST_F(EcVerifyTest, DeletedFragmentIsBadAndNamed) {
  const std::string data = Data(kChunk, 'b');
  WriteChunk(0, data);
  // Chunk 0's fragment 3 is on stripe[2] = server 3.
  ASSERT_TRUE(transport_.TrimChunks(3, kIno, 0, kChunk).ok());
  std::string bytes;
  ChunkCheck chunk = Check(0, kChunk, bytes);
  EXPECT_FALSE(chunk.status.ok());
  EXPECT_THAT(chunk.status.message(), HasSubstr("fragment 3 of 6 (storage server 3)"));
  // Still decoded from the other five: the CRC32C is the file's.
  EXPECT_EQ(bytes, data);
  EXPECT_EQ(chunk.crc32c, Crc32c(data.data(), data.size()));
}

TEST_F(EcVerifyTest, CorruptAndOtherVersionFragmentsAreBad) {
  WriteChunk(0, Data(kChunk, 'c'));
  transport_.CorruptChunk(5, kIno, 0);  // parity fragment 5
  std::string bytes;
  ChunkCheck chunk = Check(0, kChunk, bytes);
  EXPECT_THAT(chunk.status.message(), HasSubstr("fragment 5 of 6 (storage server 5)"));

  WriteChunk(1, Data(kChunk, 'd'));
  // Another write of chunk 1 reached only its fragment 1 (server 2).
  client::DecodedChunk other;
  other.length = kChunk;
  other.write_id = 12345;
  other.bytes.assign(4 * client::FragmentSize(layout_), 'x');
  const std::vector<char> f = client::EncodeFragment(layout_, other, 0);
  ASSERT_TRUE(transport_.WriteChunk(2, kIno, 1, 0, f.data(), f.size(), true).ok());
  chunk = Check(1, kChunk, bytes);
  EXPECT_THAT(chunk.status.message(), HasSubstr("fragment 1 of 6 (storage server 2)"));
  EXPECT_THAT(chunk.status.message(), HasSubstr("another version"));
  EXPECT_EQ(bytes, Data(kChunk, 'd'));
}

TEST_F(EcVerifyTest, FewerThanKFragmentsIsBad) {
  WriteChunk(0, Data(kChunk, 'e'));
  for (uint32_t id : {1u, 2u, 3u}) ASSERT_TRUE(transport_.TrimChunks(id, kIno, 0, kChunk).ok());
  std::string bytes;
  ChunkCheck chunk = Check(0, kChunk, bytes);
  EXPECT_FALSE(chunk.status.ok());
  EXPECT_FALSE(chunk.hole);
  EXPECT_THAT(chunk.status.message(), HasSubstr("chunk 0"));
}

TEST_F(EcVerifyTest, NoFragmentIsAHoleOfZeros) {
  std::string bytes;
  ChunkCheck chunk = Check(2, kChunk, bytes);
  EXPECT_TRUE(chunk.status.ok()) << chunk.status;
  EXPECT_TRUE(chunk.hole);
  EXPECT_EQ(bytes, std::string(kChunk, '\0'));
  EXPECT_EQ(chunk.crc32c, Crc32c(bytes.data(), bytes.size()));
}

}  // namespace
}  // namespace ckptfs::tools
