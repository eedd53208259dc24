// End to end on real processes: a chunk that was written and then vanished
// from every storage server holding it (its files deleted from the data
// directories, or its only copy set aside by the scrubber) reads as EIO
// through libckptfs and through a FUSE mount, with 1 and with 2 copies and
// erasure-coded; the holes of a sparse file (a write past the end, an
// ftruncate up) still read as zeros.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "tests/replication/replication_support.h"

namespace ckptfs::replication {
namespace {

using ckptfs::testing::TestData;

class LostChunkTest : public ReplicationTest {
 protected:
  // Deletes chunk `index` of `ino` (each copy or fragment) from every
  // storage server's data directory; returns how many files went.
  int DeleteChunkEverywhere(uint64_t ino, uint64_t index) {
    int removed = 0;
    for (int i = 0; i < cluster_->storage_servers(); ++i) {
      if (std::remove(ChunkPath(i, ino, index).c_str()) == 0) ++removed;
    }
    return removed;
  }

  // The inode of /d/<name>.
  uint64_t InoOf(const std::string& name) {
    absl::StatusOr<meta::Attr> attr = client_->Lookup(dir_, name);
    EXPECT_TRUE(attr.ok()) << attr.status();
    return attr.ok() ? attr->ino() : 0;
  }

  // Expects a read of the whole file through a fresh Client to fail with
  // EIO naming chunk `index` of `ino`.
  void ExpectLibraryReadEio(uint64_t ino, uint64_t index) {
    std::unique_ptr<client::Client> reader = Connect();
    ASSERT_NE(reader, nullptr);
    absl::StatusOr<std::string> back = ReadFile(*reader, ino);
    ASSERT_FALSE(back.ok()) << "inode " << ino << " read back whole, " << back->size()
                            << " bytes, with chunk " << index << " lost";
    EXPECT_EQ(ErrnoFromStatus(back.status()), EIO) << back.status();
    EXPECT_TRUE(absl::StrContains(back.status().message(),
                                  absl::StrCat("chunk ", index, " of inode ", ino)))
        << back.status();
  }

  // Expects read(2) of `path` to fail with EIO.
  static void ExpectPosixReadEio(const std::string& path) {
    absl::StatusOr<std::string> back = ckptfs::testing::ReadWholeFile(path);
    ASSERT_FALSE(back.ok()) << path << " read back whole, " << back->size()
                            << " bytes, with a chunk lost";
    EXPECT_EQ(ErrnoFromStatus(back.status()), EIO) << back.status();
  }
};

// With 1 copy and with 2 copies of every chunk.
class LostCopiesTest : public LostChunkTest, public ::testing::WithParamInterface<int> {};

TEST_P(LostCopiesTest, AWrittenChunkDeletedFromEveryServerReadsEio) {
  const int replicas = GetParam();
  ASSERT_NO_FATAL_FAILURE(StartCluster(4, replicas));
  const std::string data = TestData(5 * kChunk + 1234, 11);

  // One file through libckptfs, one through a FUSE mount.
  absl::StatusOr<meta::Attr> lib = WriteFile(*client_, dir_, "lib.pt", data);
  ASSERT_TRUE(lib.ok()) << lib.status();
  absl::StatusOr<std::string> writer = cluster_->Mount("w");
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(ckptfs::testing::WriteWholeFile(*writer + "/d/fuse.pt", data).ok());
  const uint64_t fuse_ino = InoOf("fuse.pt");
  ASSERT_NE(fuse_ino, 0u);

  EXPECT_EQ(DeleteChunkEverywhere(lib->ino(), 2), replicas);
  EXPECT_EQ(DeleteChunkEverywhere(fuse_ino, 2), replicas);

  ASSERT_NO_FATAL_FAILURE(ExpectLibraryReadEio(lib->ino(), 2));
  ASSERT_NO_FATAL_FAILURE(ExpectLibraryReadEio(fuse_ino, 2));
  absl::StatusOr<std::string> reader = cluster_->Mount("r");  // no cached pages
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_NO_FATAL_FAILURE(ExpectPosixReadEio(*reader + "/d/lib.pt"));
  ASSERT_NO_FATAL_FAILURE(ExpectPosixReadEio(*reader + "/d/fuse.pt"));
  // `ckptfs ckpt verify` reports the chunk lost (not a hole) and fails.
  std::string output;
  EXPECT_NE(ckptfs::testing::RunShell(
                absl::StrCat(ckptfs::testing::BinDir(), "/ckptfs ckpt verify ", *reader,
                             "/d --meta ", cluster_->meta_address(), " 2>&1"),
                &output),
            0)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "chunk 2: lost: it was written")) << output;
}

TEST_P(LostCopiesTest, HolesOfASparseFileReadZerosAndALostChunkOfItEio) {
  const int replicas = GetParam();
  ASSERT_NO_FATAL_FAILURE(StartCluster(4, replicas));
  absl::StatusOr<std::string> writer = cluster_->Mount("w");
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string head = TestData(1000, 12);
  const std::string tail = TestData(1000, 13);
  const std::string path = *writer + "/d/sparse.pt";
  {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(::pwrite(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
    ASSERT_EQ(::pwrite(fd, tail.data(), tail.size(), 3 * kChunk + 5),
              static_cast<ssize_t>(tail.size()));
    ASSERT_EQ(::ftruncate(fd, 6 * kChunk), 0);
    ASSERT_EQ(::close(fd), 0);
  }
  std::string want(6 * kChunk, '\0');
  want.replace(0, head.size(), head);
  want.replace(3 * kChunk + 5, tail.size(), tail);
  const uint64_t ino = InoOf("sparse.pt");
  ASSERT_NE(ino, 0u);

  absl::StatusOr<std::string> reader = cluster_->Mount("r");
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::string> back = ckptfs::testing::ReadWholeFile(*reader + "/d/sparse.pt");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameBytes(*back, want));
  absl::StatusOr<std::string> lib = ReadFile(*client_, ino);
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_TRUE(SameBytes(*lib, want));

  EXPECT_EQ(DeleteChunkEverywhere(ino, 3), replicas);
  ASSERT_NO_FATAL_FAILURE(ExpectLibraryReadEio(ino, 3));
  absl::StatusOr<std::string> fresh = cluster_->Mount("r2");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_NO_FATAL_FAILURE(ExpectPosixReadEio(*fresh + "/d/sparse.pt"));
}

INSTANTIATE_TEST_SUITE_P(Replicas, LostCopiesTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, info.param == 1 ? "Copy" : "Copies");
                         });

TEST_F(LostChunkTest, AnErasureCodedChunkWhoseFragmentsAreAllDeletedReadsEio) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(6, 1));
  ASSERT_TRUE(client_->SetXattr(dir_, "user.ckptfs.ec", "4+2", 0).ok());
  const std::string data = TestData(4 * kChunk + 99, 14);
  absl::StatusOr<meta::Attr> attr = WriteFile(*client_, dir_, "ec.pt", data);
  ASSERT_TRUE(attr.ok()) << attr.status();
  EXPECT_EQ(DeleteChunkEverywhere(attr->ino(), 1), 6);  // 4 data and 2 parity fragments
  ASSERT_NO_FATAL_FAILURE(ExpectLibraryReadEio(attr->ino(), 1));
}

TEST_F(LostChunkTest, TheOnlyCopyOfACorruptChunkSetAsideByTheScrubberReadsEio) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(
      4, 1, {"--scrub_mb_per_s=256", "--scrub_interval_s=1", "--scrub_first_delay_s=0"}));
  const std::string data = TestData(4 * kChunk + 321, 15);
  absl::StatusOr<meta::Attr> attr = WriteFile(*client_, dir_, "model.pt", data);
  ASSERT_TRUE(attr.ok()) << attr.status();
  const uint64_t ino = attr->ino();
  const int server = ServerIndexes().at(ReplicaServer(attr->layout(), 1, 0));
  const std::string chunk = ChunkPath(server, ino, 1);
  {
    // One data byte flipped, past the chunk file's 4096-byte header.
    const int fd = ::open(chunk.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << chunk;
    char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, 4096 + 555), 1);
    c = static_cast<char>(c ^ 0x20);
    ASSERT_EQ(::pwrite(fd, &c, 1, 4096 + 555), 1);
    ::close(fd);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (HasChunkFile(server, ino, 1) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_FALSE(HasChunkFile(server, ino, 1)) << "the scrubber did not set the copy aside";
  ASSERT_NO_FATAL_FAILURE(ExpectLibraryReadEio(ino, 1));
}

}  // namespace
}  // namespace ckptfs::replication
