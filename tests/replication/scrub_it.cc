// The scrubber end to end on real processes: a bit flipped in a stored
// copy of a replicated chunk is found by the storage server's scrubber (by
// its CRC32C), set aside and reported (`ckptfs status`); reads return the
// good bytes all along (from the other copy); `ckptfs repair` writes the
// copy again from the good one, after which every copy of every chunk is
// present and identical (`ckptfs ckpt verify`).
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/placement.h"
#include "tests/replication/replication_support.h"

namespace ckptfs::replication {
namespace {

using ckptfs::testing::TestData;

// Flips one data byte of a chunk file in place (past its 4096-byte header).
void FlipDataByte(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, 4096 + 777), 1);
  c = static_cast<char>(c ^ 0x10);
  ASSERT_EQ(::pwrite(fd, &c, 1, 4096 + 777), 1);
  ::close(fd);
}

// The names in storage server `i`'s quarantine directory.
std::vector<std::string> Quarantined(const ckptfs::testing::LocalCluster& cluster, int i) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(cluster.storage_dir(i) + "/quarantine", ec)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string ReadWholeFile(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return out;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST_F(ReplicationTest, ScrubberFindsAFlippedBitReadsStayGoodAndRepairRestoresTheCopy) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(
      4, 2, {"--scrub_mb_per_s=256", "--scrub_interval_s=1", "--scrub_first_delay_s=0"}));
  const std::string data = TestData(6 * kChunk + 4321, 77);
  absl::StatusOr<meta::Attr> attr = WriteFile(*client_, dir_, "model.pt", data);
  ASSERT_TRUE(attr.ok()) << attr.status();
  const uint64_t ino = attr->ino();
  std::map<uint32_t, int> index_of = ServerIndexes();

  // Copy 0 of chunk 2 and copy 1 of chunk 3: whichever copy a read tries
  // first, one of the two bad ones is met.
  struct Bad {
    uint64_t chunk;
    int bad_server;   // cluster index of the flipped copy
    int good_server;  // of the other copy
  };
  std::vector<Bad> bad;
  for (auto [chunk, copy] : {std::pair<uint64_t, int>{2, 0}, {3, 1}}) {
    const uint32_t flipped = ReplicaServer(attr->layout(), chunk, copy);
    const uint32_t other = ReplicaServer(attr->layout(), chunk, 1 - copy);
    bad.push_back({chunk, index_of.at(flipped), index_of.at(other)});
  }
  for (const Bad& b : bad)
    ASSERT_NO_FATAL_FAILURE(FlipDataByte(ChunkPath(b.bad_server, ino, b.chunk)));

  // Reads never return the flipped bytes: the server refuses a copy that
  // fails its CRC (EIO) and the client asks the other copy; later the
  // scrubber has set it aside and the copy reads as missing.
  for (int round = 0; round < 3; ++round) {
    std::unique_ptr<client::Client> reader = Connect();
    ASSERT_NE(reader, nullptr);
    absl::StatusOr<std::string> back = ReadFile(*reader, ino);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(SameBytes(*back, data)) << "round " << round;
  }

  // The scrubbers find both within a few passes.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  auto all_set_aside = [&] {
    for (const Bad& b : bad) {
      if (HasChunkFile(b.bad_server, ino, b.chunk)) return false;
    }
    return true;
  };
  while (!all_set_aside() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(all_set_aside()) << "the scrubbers did not set the flipped copies aside";
  for (const Bad& b : bad) {
    bool found = false;
    for (const std::string& name : Quarantined(*cluster_, b.bad_server)) {
      found = found || absl::StartsWith(name, absl::StrCat(ino, ".", b.chunk, "."));
    }
    EXPECT_TRUE(found) << "no quarantined copy of chunk " << b.chunk << " on server "
                       << b.bad_server;
  }

  // `ckptfs status` shows what the scrubbers found (each server reports in
  // its heartbeat, every second here).
  const std::string status_cmd =
      absl::StrCat(ckptfs::testing::BinDir(), "/ckptfs status --json --meta ",
                   cluster_->meta_address(), " 2>&1");
  std::string status;
  const absl::Time status_deadline = absl::Now() + absl::Seconds(30);
  for (;;) {
    status.clear();
    ASSERT_EQ(ckptfs::testing::RunShell(status_cmd, &status), 0) << status;
    // The two flipped copies are on two servers (stripe positions 2 and 0).
    if (CountOf(status, "\"corrupt_found\": \"1\"") == 2 || absl::Now() > status_deadline) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  EXPECT_EQ(CountOf(status, "\"corrupt_found\": \"1\""), 2) << status;

  // Still good with the copies set aside.
  {
    std::unique_ptr<client::Client> reader = Connect();
    ASSERT_NE(reader, nullptr);
    absl::StatusOr<std::string> back = ReadFile(*reader, ino);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(SameBytes(*back, data));
  }

  // One repair pass writes both copies again, identical to the good ones.
  std::string output;
  const std::string repair =
      absl::StrCat(ckptfs::testing::BinDir(), "/ckptfs repair --meta ", cluster_->meta_address(),
                   " --credential-file ", cluster_->server_credential_file(), " 2>&1");
  ASSERT_EQ(ckptfs::testing::RunShell(repair, &output), 0) << output;
  for (const Bad& b : bad) {
    ASSERT_TRUE(HasChunkFile(b.bad_server, ino, b.chunk)) << "chunk " << b.chunk << "\n" << output;
    EXPECT_EQ(ReadWholeFile(ChunkPath(b.bad_server, ino, b.chunk)),
              ReadWholeFile(ChunkPath(b.good_server, ino, b.chunk)))
        << "chunk " << b.chunk;
  }
  absl::StatusOr<std::string> mnt = cluster_->Mount("m");
  ASSERT_TRUE(mnt.ok()) << mnt.status();
  const std::string verify = absl::StrCat(ckptfs::testing::BinDir(), "/ckptfs ckpt verify ", *mnt,
                                          "/d --meta ", cluster_->meta_address(), " 2>&1");
  output.clear();
  EXPECT_EQ(ckptfs::testing::RunShell(verify, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "all intact")) << output;
}

}  // namespace
}  // namespace ckptfs::replication
