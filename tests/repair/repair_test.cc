// Unit tests of the repairer (server/repair/file_repair.h, repair_pass.h)
// over in-memory storage servers (client/testing/fake_chunk_transport.h)
// and a RepairMeta kept in the test: missing copies filled, corrupt copies
// replaced, differing copies left and reported, holes left, a dead server's
// copies moved before its stripe entry, and a pass's report; for
// erasure-coded files, lost fragments filled byte-exact, corrupt ones
// rewritten, another version's left while the file is being written, fewer
// than k reported, and a dead server's fragments decoded onto a spare before
// the stripe moves. Also the fake's FillChunk (replace only if absent).
#include <cerrno>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/fragment_io.h"
#include "client/testing/fake_chunk_transport.h"
#include "common/errno_status.h"
#include "common/placement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/repair/file_repair.h"
#include "server/repair/repair_pass.h"

namespace ckptfs::repair {
namespace {

using client::testing::FakeChunkTransport;
using ::testing::HasSubstr;

constexpr uint32_t kChunk = 16;
constexpr int64_t kNowMs = 1'000'000'000;

// A metadata service in the test: files in the root directory, the servers
// as the test sets them, MoveStripeServer calls recorded with what the
// replacement server held at that moment.
class TestMeta : public RepairMeta {
 public:
  explicit TestMeta(FakeChunkTransport* transport) : transport_(transport) {}

  struct Move {
    uint64_t ino;
    uint32_t from;
    uint32_t to;
    int chunks_on_to;   // chunks of the file `to` held when the move came
    int durable_on_to;  // of those, the ones a SYNC had made durable there
  };

  absl::StatusOr<std::vector<meta::ServerInfo>> ListServers() override { return servers; }
  absl::StatusOr<meta::ReadDirReply> ReadDir(uint64_t ino, absl::string_view start_after) override {
    meta::ReadDirReply reply;
    auto it = dirs.find(ino);
    if (it == dirs.end()) return ErrnoStatus(ENOENT, "no such directory");
    for (const auto& [name, entry] : it->second) {
      if (name > start_after) *reply.add_entries() = entry;
    }
    return reply;
  }
  absl::StatusOr<meta::Attr> GetAttr(uint64_t ino) override {
    auto it = files.find(ino);
    if (it == files.end()) return ErrnoStatus(ENOENT, "no such inode");
    return it->second;
  }
  absl::StatusOr<meta::Attr> MoveStripeServer(uint64_t ino, uint32_t from, uint32_t to) override {
    int held = 0;
    int durable = 0;
    for (uint64_t i = 0; i < 64; ++i) {
      const std::optional<std::string> bytes = transport_->ChunkBytes(to, ino, i);
      held += bytes.has_value();
      durable += bytes.has_value() && transport_->DurableChunkBytes(to, ino, i) == bytes;
    }
    moves.push_back({ino, from, to, held, durable});
    if (stale_moves > 0) {
      --stale_moves;
      return ErrnoStatus(ESTALE, "moved already");
    }
    meta::Attr& attr = files.at(ino);
    bool found = false;
    for (int i = 0; i < attr.layout().stripe_size(); ++i) {
      if (attr.layout().stripe(i) == from) {
        attr.mutable_layout()->set_stripe(i, to);
        found = true;
      }
    }
    if (!found) return ErrnoStatus(ESTALE, "stripe does not hold the server");
    return attr;
  }
  absl::Status ReportRepair(const meta::RepairReport& report) override {
    reports.push_back(report);
    return absl::OkStatus();
  }

  // A regular file in the root directory.
  meta::Attr& AddFile(const std::string& name, uint64_t ino, uint64_t size,
                      std::vector<uint32_t> stripe, uint32_t replicas, uint64_t dir = 1) {
    meta::Attr attr;
    attr.set_ino(ino);
    attr.set_type(meta::REGULAR);
    attr.set_size(size);
    attr.mutable_layout()->set_chunk_size(kChunk);
    attr.mutable_layout()->set_replicas(replicas);
    for (uint32_t id : stripe) attr.mutable_layout()->add_stripe(id);
    meta::DirEntry entry;
    entry.set_name(name);
    entry.set_ino(ino);
    entry.set_type(meta::REGULAR);
    dirs[dir][name] = entry;
    files[ino] = attr;
    return files[ino];
  }
  void AddDir(const std::string& name, uint64_t ino, uint64_t parent = 1) {
    meta::DirEntry entry;
    entry.set_name(name);
    entry.set_ino(ino);
    entry.set_type(meta::DIRECTORY);
    dirs[parent][name] = entry;
    dirs[ino];
  }
  // Servers 1..n, all alive, with `free` bytes each.
  void SetServers(int n) {
    servers.clear();
    for (int i = 1; i <= n; ++i) {
      meta::ServerInfo info;
      info.set_id(static_cast<uint32_t>(i));
      info.set_alive(true);
      info.set_capacity_bytes(1000);
      info.set_used_bytes(500);
      info.set_last_heartbeat_ms(kNowMs);
      servers.push_back(info);
    }
  }
  meta::ServerInfo& Server(uint32_t id) { return servers.at(id - 1); }

  std::vector<meta::ServerInfo> servers;
  std::map<uint64_t, std::map<std::string, meta::DirEntry>> dirs{{1, {}}};
  std::map<uint64_t, meta::Attr> files;
  std::vector<Move> moves;
  std::vector<meta::RepairReport> reports;
  int stale_moves = 0;

 private:
  FakeChunkTransport* const transport_;
};

// Bytes of chunk `i` of a test file: distinct per chunk.
std::string ChunkData(uint64_t i, size_t length = kChunk) {
  std::string s(length, '\0');
  for (size_t k = 0; k < length; ++k) s[k] = static_cast<char>('a' + (i * 7 + k) % 26);
  return s;
}

// Writes every copy of every chunk of `attr` as a writer would.
void WriteFile(FakeChunkTransport& t, const meta::Attr& attr) {
  const meta::Layout& layout = attr.layout();
  for (uint64_t i = 0; i * kChunk < attr.size(); ++i) {
    const size_t length = std::min<uint64_t>(kChunk, attr.size() - i * kChunk);
    const std::string data = ChunkData(i, length);
    for (uint32_t id : ReplicaServers(layout, i)) {
      ASSERT_TRUE(t.WriteChunk(id, attr.ino(), i, 0, data.data(), data.size(), true).ok());
    }
  }
}

class RepairTest : public ::testing::Test {
 protected:
  RepairTest() : meta_(&transport_) { meta_.SetServers(4); }

  FileRepairResult Repair(uint64_t ino, absl::Duration move_after = absl::Minutes(10)) {
    FileRepairer repairer(&meta_, &transport_, move_after);
    return repairer.Repair(absl::StrCat("/f", ino), meta_.files.at(ino), meta_.servers, kNowMs);
  }

  FakeChunkTransport transport_;
  TestMeta meta_;
};

TEST(FakeFillChunkTest, StoresOnlyWhenAbsent) {
  FakeChunkTransport t;
  ASSERT_TRUE(t.FillChunk(1, 5, 0, "abc", 3).ok());
  EXPECT_EQ(t.ChunkBytes(1, 5, 0), "abc");
  absl::Status again = t.FillChunk(1, 5, 0, "xyz!", 4);
  EXPECT_EQ(ErrnoFromStatus(again), EEXIST) << again;
  EXPECT_EQ(t.ChunkBytes(1, 5, 0), "abc");
}

TEST_F(RepairTest, MissingCopyIsFilledFromAGoodOne) {
  const meta::Attr& attr = meta_.AddFile("f", 10, 40, {1, 2, 3}, 2);
  WriteFile(transport_, attr);
  // Chunk 1 lives on servers 2 and 3; server 3 lost it (last chunk, 8 bytes).
  const std::string lost = *transport_.ChunkBytes(3, 10, 2);
  ASSERT_TRUE(transport_.TrimChunks(3, 10, 32, kChunk).ok());  // drops chunk 2 on 3
  ASSERT_FALSE(transport_.ChunkBytes(3, 10, 2).has_value());

  FileRepairResult result = Repair(10);
  EXPECT_FALSE(result.unrepairable);
  EXPECT_EQ(result.copies_rebuilt, 1u);
  EXPECT_EQ(result.bytes_written, 8u);
  EXPECT_EQ(result.chunks_checked, 3u);
  EXPECT_EQ(transport_.ChunkBytes(3, 10, 2), lost);
  EXPECT_EQ(transport_.counts().fills, 1);
}

TEST_F(RepairTest, CorruptCopyIsRewritten) {
  const meta::Attr& attr = meta_.AddFile("f", 11, 48, {1, 2, 3, 4}, 2);
  WriteFile(transport_, attr);
  transport_.CorruptChunk(2, 11, 1);  // chunk 1: servers 2 and 3
  const int replaces_before = transport_.counts().replace_writes;

  FileRepairResult result = Repair(11);
  EXPECT_FALSE(result.unrepairable) << result.problems[0];
  EXPECT_EQ(result.copies_rebuilt, 1u);
  EXPECT_EQ(transport_.counts().replace_writes, replaces_before + 1);
  std::string buf(kChunk, '\0');
  absl::StatusOr<size_t> n = transport_.ReadChunk(2, 11, 1, 0, buf.data(), buf.size());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(buf, ChunkData(1));
}

TEST_F(RepairTest, DifferingCopiesAreLeftAndReported) {
  const meta::Attr& attr = meta_.AddFile("f", 12, 32, {1, 2}, 2);
  WriteFile(transport_, attr);
  const std::string other(kChunk, 'Z');
  ASSERT_TRUE(transport_.WriteChunk(1, 12, 1, 0, other.data(), other.size(), true).ok());
  const int writes_before = transport_.counts().writes;

  FileRepairResult result = Repair(12);
  EXPECT_TRUE(result.unrepairable);
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_THAT(result.problems[0], HasSubstr("/f12"));
  EXPECT_THAT(result.problems[0], HasSubstr("chunk 1"));
  EXPECT_THAT(result.problems[0], HasSubstr("servers 2 and 1"));
  EXPECT_EQ(transport_.counts().writes, writes_before);
  EXPECT_EQ(transport_.ChunkBytes(1, 12, 1), other);
  EXPECT_EQ(transport_.ChunkBytes(2, 12, 1), ChunkData(1));
}

TEST_F(RepairTest, AHoleOnEveryCopyIsLeft) {
  meta_.AddFile("f", 13, 48, {1, 2, 3}, 2);
  // Only chunk 2 was written (a sparse file): chunks 0 and 1 are holes.
  const std::string data = ChunkData(2);
  for (uint32_t id : {3u, 1u}) {
    ASSERT_TRUE(transport_.WriteChunk(id, 13, 2, 0, data.data(), data.size(), true).ok());
  }
  FileRepairResult result = Repair(13);
  EXPECT_FALSE(result.unrepairable);
  EXPECT_EQ(result.copies_rebuilt, 0u);
  EXPECT_EQ(result.chunks_checked, 3u);
  EXPECT_EQ(transport_.ChunkCount(13), 2);
}

TEST_F(RepairTest, NoGoodCopyIsUnrepairable) {
  const meta::Attr& attr = meta_.AddFile("f", 14, 16, {1, 2}, 2);
  WriteFile(transport_, attr);
  transport_.CorruptChunk(1, 14, 0);
  transport_.CorruptChunk(2, 14, 0);
  FileRepairResult result = Repair(14);
  EXPECT_TRUE(result.unrepairable);
  ASSERT_FALSE(result.problems.empty());
  EXPECT_THAT(result.problems[0], HasSubstr("no good copy"));
}

TEST_F(RepairTest, SingleCopyFilesAreNotCompared) {
  meta_.AddFile("f", 15, 32, {1, 2}, 1);  // nothing written at all
  FileRepairResult result = Repair(15);
  EXPECT_FALSE(result.unrepairable);
  EXPECT_EQ(result.chunks_checked, 0u);
  EXPECT_EQ(transport_.counts().reads, 0);
}

// An erasure-coded (4+2) file on servers 1..7: chunks of kChunk bytes, F = 4.
meta::Attr& AddEcFile(TestMeta& meta, uint64_t ino, uint64_t size, int64_t mtime_ms) {
  meta::Attr& attr = meta.AddFile(absl::StrCat("f", ino), ino, size, {1, 2, 3, 4, 5, 6, 7}, 1);
  attr.mutable_layout()->set_ec_data(4);
  attr.mutable_layout()->set_ec_parity(2);
  attr.set_mtime_ns(mtime_ms * 1'000'000);
  return attr;
}

// Chunk `i` of an erasure-coded test file as a writer with write id `id`
// would have it.
client::DecodedChunk EcChunk(const meta::Attr& attr, uint64_t i, uint64_t id) {
  client::DecodedChunk chunk;
  chunk.length = static_cast<uint32_t>(std::min<uint64_t>(kChunk, attr.size() - i * kChunk));
  chunk.write_id = id;
  const std::string data = ChunkData(i, chunk.length);
  chunk.bytes.assign(data.begin(), data.end());
  chunk.bytes.resize(attr.layout().ec_data() * client::FragmentSize(attr.layout()), '\0');
  return chunk;
}

// Stores every fragment of every chunk of `attr` as a writer would.
void WriteEcFile(FakeChunkTransport& t, const meta::Attr& attr) {
  for (uint64_t i = 0; i * kChunk < attr.size(); ++i) {
    const client::DecodedChunk chunk = EcChunk(attr, i, 1000 + i);
    const std::vector<uint32_t> servers = ReplicaServers(attr.layout(), i);
    for (int r = 0; r < static_cast<int>(servers.size()); ++r) {
      const std::vector<char> f = client::EncodeFragment(attr.layout(), chunk, r);
      ASSERT_TRUE(t.WriteChunk(servers[r], attr.ino(), i, 0, f.data(), f.size(), true).ok());
    }
  }
}

// What every server holds of the first chunks of `ino`.
std::map<std::pair<uint32_t, uint64_t>, std::optional<std::string>> Snapshot(
    const FakeChunkTransport& t, uint64_t ino, int servers = 8) {
  std::map<std::pair<uint32_t, uint64_t>, std::optional<std::string>> held;
  for (uint32_t id = 1; id <= static_cast<uint32_t>(servers); ++id) {
    for (uint64_t i = 0; i < 8; ++i) held[{id, i}] = t.ChunkBytes(id, ino, i);
  }
  return held;
}

TEST_F(RepairTest, ErasureCodedLostFragmentsAreFilledExactly) {
  meta_.SetServers(7);
  const meta::Attr& attr = AddEcFile(meta_, 16, 40, kNowMs - 3'600'000);
  WriteEcFile(transport_, attr);
  const auto before = Snapshot(transport_, 16);
  // Server 3 loses every fragment it held (of chunks 0, 1 and 2).
  ASSERT_TRUE(transport_.TrimChunks(3, 16, 0, kChunk).ok());
  ASSERT_FALSE(transport_.ChunkBytes(3, 16, 0).has_value());

  FileRepairResult result = Repair(16);
  EXPECT_FALSE(result.unrepairable) << result.problems[0];
  EXPECT_TRUE(result.problems.empty());
  EXPECT_EQ(result.chunks_checked, 3u);
  EXPECT_EQ(result.copies_rebuilt, 3u);
  EXPECT_EQ(result.bytes_written, 3u * (client::kFragmentHeaderSize + 4));
  EXPECT_EQ(transport_.counts().fills, 3);
  EXPECT_EQ(Snapshot(transport_, 16), before);
  // A second pass finds nothing to do.
  result = Repair(16);
  EXPECT_EQ(result.copies_rebuilt, 0u);
  EXPECT_TRUE(result.problems.empty());
}

TEST_F(RepairTest, ErasureCodedCorruptFragmentsAreRewritten) {
  meta_.SetServers(7);
  const meta::Attr& attr = AddEcFile(meta_, 17, 40, kNowMs - 3'600'000);
  WriteEcFile(transport_, attr);
  const auto before = Snapshot(transport_, 17);
  transport_.CorruptChunk(5, 17, 1);  // fails the server's CRC32C check
  const std::string garbage = "garbage, no header at all";
  ASSERT_TRUE(transport_.WriteChunk(2, 17, 0, 0, garbage.data(), garbage.size(), true).ok());

  FileRepairResult result = Repair(17);
  EXPECT_FALSE(result.unrepairable) << result.problems[0];
  EXPECT_EQ(result.copies_rebuilt, 2u);
  EXPECT_EQ(transport_.counts().fills, 0);
  EXPECT_EQ(Snapshot(transport_, 17), before);
}

TEST_F(RepairTest, ErasureCodedOtherVersionIsRewrittenOnlyOnceTheFileIsQuiet) {
  meta_.SetServers(7);
  meta::Attr& attr = AddEcFile(meta_, 18, 16, kNowMs - 5'000);  // written 5 s ago
  WriteEcFile(transport_, attr);
  const auto before = Snapshot(transport_, 18);
  // Fragment 2 (server 2) of another write of chunk 0.
  const std::vector<char> other = client::EncodeFragment(attr.layout(), EcChunk(attr, 0, 4242), 1);
  ASSERT_TRUE(transport_.WriteChunk(2, 18, 0, 0, other.data(), other.size(), true).ok());

  FileRepairResult result = Repair(18);
  EXPECT_EQ(result.copies_rebuilt, 0u);
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_THAT(result.problems[0], HasSubstr("being written"));
  EXPECT_THAT(result.problems[0], HasSubstr("server 2"));
  EXPECT_EQ(transport_.ChunkBytes(2, 18, 0), std::string(other.begin(), other.end()));

  attr.set_mtime_ns((kNowMs - 120'000) * 1'000'000);  // last written 2 minutes ago
  // Fragment 1 (server 1) is lost too: filled first, before the rewrite's
  // second read.
  ASSERT_TRUE(transport_.TrimChunks(1, 18, 0, kChunk).ok());
  result = Repair(18);
  EXPECT_FALSE(result.unrepairable);
  EXPECT_TRUE(result.problems.empty()) << result.problems[0];
  EXPECT_EQ(result.copies_rebuilt, 2u);
  EXPECT_EQ(Snapshot(transport_, 18), before);
}

TEST_F(RepairTest, ErasureCodedFewerThanKFragmentsIsUnrepairable) {
  meta_.SetServers(7);
  const meta::Attr& attr = AddEcFile(meta_, 19, 16, kNowMs - 3'600'000);
  WriteEcFile(transport_, attr);
  for (uint32_t id : {1u, 2u, 3u}) ASSERT_TRUE(transport_.TrimChunks(id, 19, 0, kChunk).ok());

  FileRepairResult result = Repair(19);
  EXPECT_TRUE(result.unrepairable);
  EXPECT_EQ(result.copies_rebuilt, 0u);
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_THAT(result.problems[0], HasSubstr("chunk 0"));
  EXPECT_FALSE(transport_.ChunkBytes(1, 19, 0).has_value());
}

TEST_F(RepairTest, ErasureCodedHoleIsLeftEvenWithADeadServer) {
  meta_.SetServers(7);
  AddEcFile(meta_, 21, 32, kNowMs - 3'600'000);  // never written: two holes
  meta_.Server(4).set_alive(false);
  transport_.SetServerDown(4, true);
  FileRepairResult result = Repair(21);
  EXPECT_FALSE(result.unrepairable) << result.problems[0];
  EXPECT_EQ(result.chunks_checked, 0u);
  EXPECT_EQ(transport_.ChunkCount(21), 0);
}

TEST_F(RepairTest, ErasureCodedFragmentsOfADeadServerAreMovedThenTheStripe) {
  meta_.SetServers(8);  // 8 is outside the stripe
  const meta::Attr& attr = AddEcFile(meta_, 22, 40, kNowMs - 3'600'000);
  WriteEcFile(transport_, attr);
  const auto before = Snapshot(transport_, 22);
  meta_.Server(2).set_alive(false);
  meta_.Server(2).set_last_heartbeat_ms(kNowMs - 60'000);
  transport_.SetServerDown(2, true);

  FileRepairResult result = Repair(22, absl::Seconds(10));
  EXPECT_FALSE(result.unrepairable) << result.problems[0];
  // Chunk i's fragments are on stripe[(i + r) % 7]: server 2 holds
  // fragment 2 of chunk 0 and fragment 1 of chunk 1, and none of chunk 2.
  EXPECT_EQ(result.copies_moved, 2u);
  ASSERT_EQ(meta_.moves.size(), 1u);
  EXPECT_EQ(meta_.moves[0].from, 2u);
  EXPECT_EQ(meta_.moves[0].to, 8u);
  EXPECT_EQ(meta_.moves[0].chunks_on_to, 2);  // all written before the move
  for (uint64_t i : {0u, 1u}) {
    EXPECT_EQ(transport_.ChunkBytes(8, 22, i), before.at({2, i})) << "chunk " << i;
  }
  EXPECT_FALSE(transport_.ChunkBytes(8, 22, 2).has_value());
  EXPECT_EQ(meta_.files.at(22).layout().stripe(1), 8u);
  // The chunks checked after the move are whole again.
  EXPECT_EQ(result.chunks_checked, 3u);
  EXPECT_EQ(result.copies_rebuilt, 0u);
}

TEST_F(RepairTest, ErasureCodedDeadServerWithoutASpareIsUnrepairable) {
  meta_.SetServers(7);
  const meta::Attr& attr = AddEcFile(meta_, 23, 16, kNowMs - 3'600'000);
  WriteEcFile(transport_, attr);
  meta_.Server(2).set_alive(false);
  meta_.Server(2).set_last_heartbeat_ms(kNowMs - 60'000);
  transport_.SetServerDown(2, true);
  FileRepairResult result = Repair(23, absl::Seconds(10));
  EXPECT_TRUE(result.unrepairable);
  EXPECT_TRUE(meta_.moves.empty());
  ASSERT_FALSE(result.problems.empty());
  EXPECT_THAT(result.problems[0], HasSubstr("erasure-coded"));
}

TEST_F(RepairTest, DeadServerCopiesAreMovedThenTheStripe) {
  const meta::Attr& attr = meta_.AddFile("f", 20, 64, {1, 2, 3}, 2);
  WriteFile(transport_, attr);
  // Server 2 died 60 s ago; server 4 (outside the stripe) has room.
  meta_.Server(2).set_alive(false);
  meta_.Server(2).set_last_heartbeat_ms(kNowMs - 60'000);
  transport_.SetServerDown(2, true);

  FileRepairResult result = Repair(20, absl::Seconds(10));
  EXPECT_FALSE(result.unrepairable) << result.problems[0];
  // Chunks 0..3 on {1,2},{2,3},{3,1},{1,2}: server 2 held chunks 0, 1, 3.
  EXPECT_EQ(result.copies_moved, 3u);
  ASSERT_EQ(meta_.moves.size(), 1u);
  EXPECT_EQ(meta_.moves[0].ino, 20u);
  EXPECT_EQ(meta_.moves[0].from, 2u);
  EXPECT_EQ(meta_.moves[0].to, 4u);
  EXPECT_EQ(meta_.moves[0].chunks_on_to, 3);  // all copied before the move
  for (uint64_t i : {0u, 1u, 3u}) EXPECT_EQ(transport_.ChunkBytes(4, 20, i), ChunkData(i));
  EXPECT_FALSE(transport_.ChunkBytes(4, 20, 2).has_value());
  EXPECT_EQ(meta_.files.at(20).layout().stripe(1), 4u);
  // The new copies were then compared with the others: all agree.
  EXPECT_EQ(result.chunks_checked, 4u);
}

// The copies written onto the spare are its file's only copies there once
// the stripe names it: they must be durable before the move, or a power
// loss on the spare loses them.
TEST_F(RepairTest, CopiesMovedOntoASpareAreDurableBeforeTheStripeMoves) {
  const meta::Attr& attr = meta_.AddFile("f", 24, 64, {1, 2, 3}, 2);
  WriteFile(transport_, attr);
  meta_.Server(2).set_alive(false);
  meta_.Server(2).set_last_heartbeat_ms(kNowMs - 60'000);
  transport_.SetServerDown(2, true);

  FileRepairResult result = Repair(24, absl::Seconds(10));
  EXPECT_FALSE(result.unrepairable) << result.problems[0];
  ASSERT_EQ(meta_.moves.size(), 1u);
  EXPECT_EQ(meta_.moves[0].chunks_on_to, 3);
  EXPECT_EQ(meta_.moves[0].durable_on_to, 3) << "the stripe moved onto unsynced copies";
  transport_.LosePower(4);
  for (uint64_t i : {0u, 1u, 3u}) {
    EXPECT_EQ(transport_.ChunkBytes(4, 24, i), ChunkData(i)) << "chunk " << i;
  }
}

TEST_F(RepairTest, ErasureCodedFragmentsMovedOntoASpareAreDurableBeforeTheStripeMoves) {
  meta_.SetServers(8);
  const meta::Attr& attr = AddEcFile(meta_, 25, 40, kNowMs - 3'600'000);
  WriteEcFile(transport_, attr);
  meta_.Server(2).set_alive(false);
  meta_.Server(2).set_last_heartbeat_ms(kNowMs - 60'000);
  transport_.SetServerDown(2, true);

  FileRepairResult result = Repair(25, absl::Seconds(10));
  EXPECT_FALSE(result.unrepairable) << result.problems[0];
  ASSERT_EQ(meta_.moves.size(), 1u);
  EXPECT_EQ(meta_.moves[0].chunks_on_to, 2);
  EXPECT_EQ(meta_.moves[0].durable_on_to, 2) << "the stripe moved onto unsynced fragments";
}

// A filled or rewritten copy counts as rebuilt only once it is durable.
TEST_F(RepairTest, FilledAndRewrittenCopiesAreDurableWhenReported) {
  const meta::Attr& attr = meta_.AddFile("f", 26, 40, {1, 2, 3}, 2);
  WriteFile(transport_, attr);
  // Server 3 lost chunk 2 (also on server 1); chunk 1 (also on server 3)
  // is corrupt on server 2.
  ASSERT_TRUE(transport_.TrimChunks(3, 26, 32, kChunk).ok());
  transport_.CorruptChunk(2, 26, 1);

  FileRepairResult result = Repair(26);
  EXPECT_FALSE(result.unrepairable) << result.problems[0];
  EXPECT_EQ(result.copies_rebuilt, 2u);
  transport_.LosePower(3);
  transport_.LosePower(2);
  EXPECT_EQ(transport_.ChunkBytes(3, 26, 2), ChunkData(2, 8)) << "the filled copy";
  EXPECT_EQ(transport_.ChunkBytes(2, 26, 1), ChunkData(1)) << "the rewritten copy";
}

TEST_F(RepairTest, MovePicksTheSpareWithTheMostFreeBytes) {
  meta_.SetServers(5);
  meta_.Server(4).set_used_bytes(900);
  const meta::Attr& attr = meta_.AddFile("f", 21, 32, {1, 2, 3}, 2);
  WriteFile(transport_, attr);
  meta_.Server(3).set_alive(false);
  meta_.Server(3).set_last_heartbeat_ms(kNowMs - 5'000);
  FileRepairResult result = Repair(21, absl::ZeroDuration());
  ASSERT_EQ(meta_.moves.size(), 1u);
  EXPECT_EQ(meta_.moves[0].to, 5u);
  EXPECT_FALSE(result.unrepairable);
}

TEST_F(RepairTest, AServerDeadForLessThanMoveAfterIsLeft) {
  const meta::Attr& attr = meta_.AddFile("f", 22, 32, {1, 2, 3}, 2);
  WriteFile(transport_, attr);
  meta_.Server(2).set_alive(false);
  meta_.Server(2).set_last_heartbeat_ms(kNowMs - 5'000);
  transport_.SetServerDown(2, true);
  FileRepairResult result = Repair(22, absl::Seconds(10));
  EXPECT_FALSE(result.unrepairable);
  EXPECT_TRUE(meta_.moves.empty());
  EXPECT_EQ(transport_.ChunkCount(22), 4);
}

TEST_F(RepairTest, NoSpareServerIsUnrepairable) {
  meta_.SetServers(3);
  const meta::Attr& attr = meta_.AddFile("f", 23, 32, {1, 2, 3}, 2);
  WriteFile(transport_, attr);
  meta_.Server(1).set_alive(false);
  meta_.Server(1).set_last_heartbeat_ms(kNowMs - 60'000);
  FileRepairResult result = Repair(23, absl::Seconds(1));
  EXPECT_TRUE(result.unrepairable);
  EXPECT_TRUE(meta_.moves.empty());
  ASSERT_FALSE(result.problems.empty());
  EXPECT_THAT(result.problems[0], HasSubstr("no live server outside its stripe"));
}

TEST_F(RepairTest, OneCopyOnADeadServerIsUnrepairable) {
  meta_.AddFile("f", 24, 32, {1, 2}, 1);
  meta_.Server(2).set_alive(false);
  meta_.Server(2).set_last_heartbeat_ms(kNowMs - 60'000);
  FileRepairResult result = Repair(24, absl::Seconds(1));
  EXPECT_TRUE(result.unrepairable);
  EXPECT_TRUE(meta_.moves.empty());
  ASSERT_FALSE(result.problems.empty());
  EXPECT_THAT(result.problems[0], HasSubstr("only copy"));
}

TEST_F(RepairTest, AStaleMoveRereadsTheLayout) {
  const meta::Attr attr = meta_.AddFile("f", 25, 32, {1, 2, 3}, 2);  // as the pass saw it
  WriteFile(transport_, attr);
  meta_.Server(2).set_alive(false);
  meta_.Server(2).set_last_heartbeat_ms(kNowMs - 60'000);
  transport_.SetServerDown(2, true);
  // Someone else moved server 2 to server 4 meanwhile.
  meta_.files.at(25).mutable_layout()->set_stripe(1, 4);
  for (uint64_t i : {0u, 1u}) {
    const std::string data = ChunkData(i);
    ASSERT_TRUE(transport_.WriteChunk(4, 25, i, 0, data.data(), data.size(), true).ok());
  }
  meta_.stale_moves = 1;
  FileRepairer repairer(&meta_, &transport_, absl::Seconds(1));
  FileRepairResult result = repairer.Repair("/f25", attr, meta_.servers, kNowMs);
  EXPECT_FALSE(result.unrepairable);
  EXPECT_EQ(meta_.moves.size(), 1u);  // the stale one only
  EXPECT_EQ(result.chunks_checked, 2u);
}

TEST_F(RepairTest, APassWalksTheTreeAndReports) {
  meta_.AddDir("d", 2);
  const meta::Attr a = meta_.AddFile("a", 30, 32, {1, 2}, 2);
  const meta::Attr b = meta_.AddFile("b", 31, 32, {3, 4}, 2, /*dir=*/2);
  WriteFile(transport_, a);
  WriteFile(transport_, b);
  transport_.CorruptChunk(4, 31, 0);
  const std::string differ(kChunk, 'Q');
  ASSERT_TRUE(transport_.WriteChunk(1, 30, 1, 0, differ.data(), differ.size(), true).ok());
  std::vector<std::string> problems;
  RepairPassOptions options;
  options.repairer = "test";
  options.on_problem = [&](const std::string& p) { problems.push_back(p); };
  RepairPass pass(&meta_, &transport_, options);
  absl::StatusOr<meta::RepairReport> report = pass.Run(3);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->passes_completed(), 4u);
  EXPECT_EQ(report->files_total(), 2u);
  EXPECT_EQ(report->files_checked(), 2u);
  EXPECT_EQ(report->chunks_checked(), 4u);
  EXPECT_EQ(report->copies_rebuilt(), 1u);
  EXPECT_EQ(report->bytes_written(), kChunk);
  EXPECT_EQ(report->files_unrepairable(), 1u);
  EXPECT_THAT(report->last_problem(), HasSubstr("file /a"));
  EXPECT_GT(report->pass_ended_ms(), 0);
  EXPECT_EQ(report->repairer(), "test");
  ASSERT_EQ(problems.size(), 1u);
  // Reported at the start and at the end, the last one the final report.
  ASSERT_GE(meta_.reports.size(), 2u);
  EXPECT_EQ(meta_.reports.front().pass_ended_ms(), 0);
  EXPECT_EQ(meta_.reports.back().SerializeAsString(), report->SerializeAsString());
  std::string buf(kChunk, '\0');
  ASSERT_TRUE(transport_.ReadChunk(4, 31, 0, 0, buf.data(), buf.size()).ok());
  EXPECT_EQ(buf, ChunkData(0));
}

}  // namespace
}  // namespace ckptfs::repair
