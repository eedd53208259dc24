// client/fragment_io.h over the in-memory storage servers: an erasure-coded
// (4+2) chunk written whole or merged reads back exact, directly and with
// any two of its six servers down or missing their fragment; three lost is
// an error, no fragment at all a hole; a write that reached only some
// fragments is never decoded into a mix of versions; a cut re-encodes the
// chunk; a fragment that disagrees with the others is found.
#include "client/fragment_io.h"

#include <cerrno>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "client/layout.h"
#include "client/stripe_ops.h"
#include "client/testing/fake_chunk_transport.h"
#include "common/errno_status.h"
#include "common/placement.h"
#include "gtest/gtest.h"

namespace ckptfs::client {
namespace {

constexpr uint32_t kChunk = 64 * 1024;
constexpr uint64_t kIno = 77;

std::string Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

class FragmentIoTest : public ::testing::Test {
 protected:
  FragmentIoTest() : executor_(4) {
    layout_.set_chunk_size(kChunk);
    for (uint32_t id = 1; id <= 6; ++id) layout_.add_stripe(id);
    layout_.set_replicas(1);
    layout_.set_ec_data(4);
    layout_.set_ec_parity(2);
  }

  absl::Status Write(uint64_t chunk, uint32_t offset, const std::string& data, bool replace) {
    ChunkWrite write;
    write.ino = kIno;
    write.chunk_index = chunk;
    write.offset = offset;
    write.data = data.data();
    write.length = data.size();
    write.replace = replace;
    absl::Notification finished;
    absl::Status result;
    WriteChunkCopies(transport_, executor_, layout_, write, [&](absl::Status status) {
      result = std::move(status);
      finished.Notify();
    });
    finished.WaitForNotification();
    return result;
  }

  // Bytes [offset, offset + length) of the chunk, zeros past its end.
  absl::StatusOr<std::string> Read(uint64_t chunk, uint32_t offset, size_t length) {
    std::string out(length, '\x55');
    absl::StatusOr<size_t> n =
        ReadChunkCopy(transport_, nullptr, layout_, kIno, chunk, offset, out.data(), length);
    if (!n.ok()) return n.status();
    EXPECT_LE(*n, length);
    return out;
  }

  void ExpectReadsBack(uint64_t chunk, const std::string& want, const std::string& context) {
    // Whole, and pieces that start and end inside fragments and cross them.
    const std::vector<std::pair<uint32_t, size_t>> ranges = {
        {0, kChunk}, {0, 1}, {100, 20000}, {16380, 10}, {40000, kChunk - 40000}, {kChunk - 1, 1}};
    for (auto [offset, length] : ranges) {
      absl::StatusOr<std::string> got = Read(chunk, offset, length);
      ASSERT_TRUE(got.ok()) << context << ": " << got.status();
      std::string expect = want.substr(std::min<size_t>(offset, want.size()), length);
      expect.resize(length, '\0');
      ASSERT_TRUE(*got == expect) << context << ": range " << offset << "+" << length;
    }
  }

  uint32_t ServerOf(uint64_t chunk, int fragment) {
    return ReplicaServer(layout_, chunk, fragment);
  }

  meta::Layout layout_;
  testing::FakeChunkTransport transport_;
  IoExecutor executor_;
};

TEST_F(FragmentIoTest, WholeAndShortChunksReadBackAndStoreTheirShareEach) {
  ASSERT_TRUE(ValidateLayout(layout_).ok());
  EXPECT_EQ(FragmentSize(layout_), kChunk / 4);
  EXPECT_EQ(ReplicaCount(layout_), 6);
  const std::string full = Random(kChunk, 1);
  const std::string tail = Random(10000, 2);
  ASSERT_TRUE(Write(0, 0, full, true).ok());
  ASSERT_TRUE(Write(1, 0, tail, true).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, full, "full"));
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(1, tail, "short"));
  // 10,000 bytes: all in data fragment 1; fragments 2-4 hold a header only;
  // parity holds 10,000 bytes.
  const std::vector<size_t> sizes = {10016, 16, 16, 16, 10016, 10016};
  for (int r = 0; r < 6; ++r) {
    std::optional<std::string> stored = transport_.ChunkBytes(ServerOf(1, r), kIno, 1);
    ASSERT_TRUE(stored.has_value()) << r;
    EXPECT_EQ(stored->size(), sizes[static_cast<size_t>(r)]) << "fragment " << r;
  }
  // The data fragments hold the chunk's bytes as they are (after the header).
  EXPECT_EQ(transport_.ChunkBytes(ServerOf(0, 2), kIno, 0)->substr(kFragmentHeaderSize),
            full.substr(2 * (kChunk / 4), kChunk / 4));
}

TEST_F(FragmentIoTest, AnyTwoServersDownOrMissingStillReadExactThreeIsAnError) {
  const std::string full = Random(kChunk, 3);
  const std::string tail = Random(kChunk / 2 + 5, 4);
  ASSERT_TRUE(Write(0, 0, full, true).ok());
  ASSERT_TRUE(Write(1, 0, tail, true).ok());
  for (uint32_t a = 1; a <= 6; ++a) {
    for (uint32_t b = a + 1; b <= 6; ++b) {
      transport_.SetServerDown(a, true);
      transport_.SetServerDown(b, true);
      const std::string context = absl::StrCat("servers ", a, " and ", b, " down");
      ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, full, context));
      ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(1, tail, context));
      transport_.SetServerDown(a, false);
      transport_.SetServerDown(b, false);
    }
  }
  for (uint32_t s : {1u, 3u, 6u}) transport_.SetServerDown(s, true);
  EXPECT_EQ(ErrnoFromStatus(Read(0, 0, kChunk).status()), EIO);
  for (uint32_t s : {1u, 3u, 6u}) transport_.SetServerDown(s, false);

  // Lost fragments (a server that lost its disk, a quarantined copy) are
  // decoded around, too.
  ASSERT_TRUE(transport_.TrimChunks(ServerOf(0, 0), kIno, 0, kChunk).ok());
  ASSERT_TRUE(transport_.TrimChunks(ServerOf(0, 3), kIno, 0, kChunk).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, full, "fragments 1 and 4 gone"));
  // A chunk none of whose fragments exist is a hole, also with m servers
  // down; with m + 1 down it might not be (an error, not zeros).
  EXPECT_EQ(ErrnoFromStatus(Read(5, 0, 100).status()), ENOENT);
  transport_.SetServerDown(ServerOf(5, 0), true);
  transport_.SetServerDown(ServerOf(5, 4), true);
  EXPECT_EQ(ErrnoFromStatus(Read(5, 0, 100).status()), ENOENT);
  transport_.SetServerDown(ServerOf(5, 2), true);
  EXPECT_NE(ErrnoFromStatus(Read(5, 0, 100).status()), ENOENT);
  for (int r : {0, 2, 4}) transport_.SetServerDown(ServerOf(5, r), false);
}

TEST_F(FragmentIoTest, AFragmentOfTheWrongLengthIsNotDecodedFrom) {
  const std::string data = Random(kChunk, 21);
  ASSERT_TRUE(Write(0, 0, data, true).ok());
  // Data fragment 2 cut short, header intact: it must not be zero-padded
  // into a decode.
  std::string fragment = *transport_.ChunkBytes(ServerOf(0, 1), kIno, 0);
  fragment.resize(fragment.size() - 100);
  ASSERT_TRUE(
      transport_.WriteChunk(ServerOf(0, 1), kIno, 0, 0, fragment.data(), fragment.size(), true)
          .ok());
  transport_.SetServerDown(ServerOf(0, 0), true);  // force the decode
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, data, "short fragment left out"));
  transport_.SetServerDown(ServerOf(0, 0), false);
  absl::StatusOr<DecodedChunk> checked =
      ReadWholeChunkFragments(transport_, nullptr, layout_, kIno, 0, /*check_all=*/true);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_FALSE(checked->fragment_good[1]);
  for (int r : {0, 2, 3, 4, 5}) EXPECT_TRUE(checked->fragment_good[static_cast<size_t>(r)]) << r;
}

TEST_F(FragmentIoTest, ACutThatFailsOnOneFragmentStillLeavesTheChunkReadable) {
  const std::string data = Random(kChunk, 22);
  ASSERT_TRUE(Write(0, 0, data, true).ok());
  // The cut's write of data fragment 3 fails (its server is down then, and
  // comes back with the old fragment).
  transport_.SetServerDown(ServerOf(0, 2), true);
  EXPECT_FALSE(CutChunkFragments(transport_, layout_, kIno, 0, 1000).ok());
  transport_.SetServerDown(ServerOf(0, 2), false);
  // Five of six hold the cut version, which decodes (stopping at the
  // failure would have left two new and three old: EIO).
  // (Reads straight from data fragment 3 may still see its old bytes: the
  // truncate failed, and its caller keeps the old size.)
  transport_.SetServerDown(ServerOf(0, 0), true);
  absl::StatusOr<DecodedChunk> decoded =
      ReadWholeChunkFragments(transport_, nullptr, layout_, kIno, 0, /*check_all=*/false);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->length, 1000u);
  EXPECT_EQ(std::string(decoded->bytes.data(), 1000), data.substr(0, 1000));
  absl::StatusOr<std::string> head = Read(0, 0, 1000);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(*head, data.substr(0, 1000));
  transport_.SetServerDown(ServerOf(0, 0), false);
}

TEST_F(FragmentIoTest, APartialWriteMergesIntoTheChunkEvenWithAFragmentLost) {
  const std::string first = Random(30000, 5);
  ASSERT_TRUE(Write(0, 0, first, true).ok());
  const std::string later = Random(5000, 6);
  ASSERT_TRUE(Write(0, 40000, later, false).ok());
  std::string want = first;
  want.resize(40000, '\0');
  want += later;
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, want, "merged"));
  // The merge reads the chunk back, decoding around a lost fragment.
  ASSERT_TRUE(transport_.TrimChunks(ServerOf(0, 1), kIno, 0, kChunk).ok());
  const std::string middle = Random(100, 7);
  ASSERT_TRUE(Write(0, 16000, middle, false).ok());
  want.replace(16000, middle.size(), middle);
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, want, "merged past a lost fragment"));
  // Every fragment was written again by that merge.
  EXPECT_TRUE(transport_.ChunkBytes(ServerOf(0, 1), kIno, 0).has_value());
  // A merge into a hole makes the bytes before it zeros.
  ASSERT_TRUE(Write(3, 20000, later, false).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(3, std::string(20000, '\0') + later, "into a hole"));
}

TEST_F(FragmentIoTest, AWriteThatReachedSomeFragmentsFailsAndIsNeverDecodedIntoAMix) {
  const std::string v1 = Random(kChunk, 8);
  ASSERT_TRUE(Write(0, 0, v1, true).ok());
  transport_.FailWrites(EIO, /*after=*/3);
  const std::string v2 = Random(kChunk, 9);
  EXPECT_FALSE(Write(0, 0, v2, true).ok());
  transport_.FailWrites(0);
  // Three fragments of each version: a decode has no four that agree.
  transport_.SetServerDown(ServerOf(0, 0), true);
  absl::StatusOr<std::string> mixed = Read(0, 0, kChunk);
  EXPECT_EQ(ErrnoFromStatus(mixed.status()), EIO) << "a decode mixed two versions";
  transport_.SetServerDown(ServerOf(0, 0), false);
  // Writing it again heals it.
  ASSERT_TRUE(Write(0, 0, v2, true).ok());
  transport_.SetServerDown(ServerOf(0, 0), true);
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, v2, "rewritten"));
  transport_.SetServerDown(ServerOf(0, 0), false);
  // And a write with a server down fails: every fragment must be stored.
  transport_.SetServerDown(ServerOf(0, 5), true);
  EXPECT_FALSE(Write(0, 0, v1, true).ok());
  transport_.SetServerDown(ServerOf(0, 5), false);
}

// With every server up, a rewrite that reached only some data fragments
// (a writer that died midway, a failed truncate's re-encode) must not be
// read back as a mix: each read checks that the data fragments it reads
// belong to one write, and otherwise decodes the version most fragments
// hold.
TEST_F(FragmentIoTest, AllServersUpAPartialRewriteIsNeverReadAsAMix) {
  const std::string v1 = Random(kChunk, 20);
  ASSERT_TRUE(Write(0, 0, v1, true).ok());
  // Version 2 reached data fragment 1 only.
  DecodedChunk v2;
  v2.length = kChunk;
  v2.write_id = 0x2222;
  const std::string v2_bytes = Random(kChunk, 21);
  v2.bytes.assign(v2_bytes.begin(), v2_bytes.end());
  const std::vector<char> fragment = EncodeFragment(layout_, v2, 0);
  ASSERT_TRUE(
      transport_.WriteChunk(ServerOf(0, 0), kIno, 0, 0, fragment.data(), fragment.size(), true)
          .ok());
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, v1, "five fragments of version 1, one of 2"));
  // A shorter version on one fragment: its length disagrees too.
  DecodedChunk shorter;
  shorter.length = 100;
  shorter.write_id = 0x3333;
  shorter.bytes.assign(size_t{kChunk}, '\0');
  const std::vector<char> short_fragment = EncodeFragment(layout_, shorter, 2);
  ASSERT_TRUE(transport_
                  .WriteChunk(ServerOf(0, 2), kIno, 0, 0, short_fragment.data(),
                              short_fragment.size(), true)
                  .ok());
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, v1, "four of version 1, two others"));
  // Version 2 on a parity fragment as well: version 1 keeps three, no
  // version has the four a decode needs, and every read is an error.
  ASSERT_TRUE(
      transport_.WriteChunk(ServerOf(0, 5), kIno, 0, 0, fragment.data(), fragment.size(), true)
          .ok());
  for (auto [offset, length] : std::vector<std::pair<uint32_t, size_t>>{{0, kChunk}, {20000, 10}}) {
    EXPECT_EQ(ErrnoFromStatus(Read(0, offset, length).status()), EIO)
        << "range " << offset << "+" << length << " read from fragments of three versions";
  }
}

TEST_F(FragmentIoTest, TruncateDropsWholeChunksAndReencodesTheOneItEndsIn) {
  const std::string c0 = Random(kChunk, 10);
  const std::string c1 = Random(kChunk, 11);
  const std::string c2 = Random(kChunk / 3, 12);
  ASSERT_TRUE(Write(0, 0, c0, true).ok());
  ASSERT_TRUE(Write(1, 0, c1, true).ok());
  ASSERT_TRUE(Write(2, 0, c2, true).ok());
  const uint64_t new_size = kChunk + 20000;
  ASSERT_TRUE(TrimStripe(transport_, executor_, kIno, layout_, new_size).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(0, c0, "untouched"));
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(1, c1.substr(0, 20000), "cut"));
  EXPECT_EQ(ErrnoFromStatus(Read(2, 0, 10).status()), ENOENT);
  // The cut chunk decodes to its new length with fragments lost too.
  transport_.SetServerDown(ServerOf(1, 1), true);
  transport_.SetServerDown(ServerOf(1, 4), true);
  ASSERT_NO_FATAL_FAILURE(ExpectReadsBack(1, c1.substr(0, 20000), "cut, decoded"));
}

TEST_F(FragmentIoTest, ACheckOfEveryFragmentFindsOneThatDisagrees) {
  const std::string data = Random(kChunk, 13);
  ASSERT_TRUE(Write(0, 0, data, true).ok());
  absl::StatusOr<DecodedChunk> clean =
      ReadWholeChunkFragments(transport_, nullptr, layout_, kIno, 0, /*check_all=*/true);
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_EQ(clean->length, kChunk);
  for (int r = 0; r < 6; ++r) EXPECT_TRUE(clean->fragment_good[static_cast<size_t>(r)]) << r;
  EXPECT_EQ(std::string(clean->bytes.begin(), clean->bytes.end()), data);

  // A parity fragment with a byte changed but its header intact (bit rot
  // the storage CRC would also catch; here it got past it).
  std::string parity = *transport_.ChunkBytes(ServerOf(0, 5), kIno, 0);
  parity[kFragmentHeaderSize + 99] ^= 0x40;
  ASSERT_TRUE(
      transport_.WriteChunk(ServerOf(0, 5), kIno, 0, 0, parity.data(), parity.size(), true).ok());
  absl::StatusOr<DecodedChunk> checked =
      ReadWholeChunkFragments(transport_, nullptr, layout_, kIno, 0, /*check_all=*/true);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_FALSE(checked->fragment_good[5]);
  for (int r = 0; r < 5; ++r) EXPECT_TRUE(checked->fragment_good[static_cast<size_t>(r)]) << r;
  // What a repair writes back is the fragment as it should be.
  const std::vector<char> fixed = EncodeFragment(layout_, *checked, 5);
  ASSERT_TRUE(
      transport_.WriteChunk(ServerOf(0, 5), kIno, 0, 0, fixed.data(), fixed.size(), true).ok());
  absl::StatusOr<DecodedChunk> healed =
      ReadWholeChunkFragments(transport_, nullptr, layout_, kIno, 0, /*check_all=*/true);
  ASSERT_TRUE(healed.ok());
  EXPECT_TRUE(healed->fragment_good[5]);
}

TEST_F(FragmentIoTest, LayoutsWithTooFewServersForTheCodeAreRefused) {
  meta::Layout narrow = layout_;
  narrow.mutable_stripe()->RemoveLast();
  EXPECT_EQ(ErrnoFromStatus(ValidateLayout(narrow)), EIO);
  meta::Layout no_parity = layout_;
  no_parity.set_ec_parity(0);
  EXPECT_EQ(ErrnoFromStatus(ValidateLayout(no_parity)), EIO);
}

}  // namespace
}  // namespace ckptfs::client
