// Replication on real processes: with --replicas=2 every chunk is stored on
// the two servers its placement names; closed files read back byte-exact
// with any one storage server killed (-9), through libckptfs and through a
// FUSE mount; a directory's user.ckptfs.replicas overrides the cluster's
// and bad values are EINVAL; a create that cannot get enough servers fails
// clearly; `ckptfs ckpt verify` reports a copy deleted from a server's disk;
// a partial write to a chunk one server lost rebuilds that copy instead of
// filling it with zeros, and sparse writes make the same holes on every copy.
#include <signal.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "absl/strings/match.h"
#include "common/errno_status.h"
#include "tests/replication/replication_support.h"

namespace ckptfs::replication {
namespace {

using ckptfs::testing::ReadWholeFile;
using ckptfs::testing::RunShell;
using ckptfs::testing::TestData;
using ckptfs::testing::WriteWholeFile;

// 6 whole chunks and a partial one: every placement on 3 servers, twice.
constexpr size_t kFileSize = 6 * kChunk + 1234;

TEST_F(ReplicationTest, EveryChunkHasACopyOnEachServerItsPlacementNames) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, 2));
  const std::string data = TestData(kFileSize, 1);
  absl::StatusOr<meta::Attr> attr = WriteFile(*client_, dir_, "f", data);
  ASSERT_TRUE(attr.ok()) << attr.status();
  ASSERT_EQ(attr->layout().replicas(), 2u);
  ASSERT_EQ(attr->layout().stripe_size(), 3);
  const std::map<uint32_t, int> index = ServerIndexes();
  ASSERT_EQ(index.size(), 3u);
  const uint64_t chunks = client::ChunkCount(kFileSize, kChunk);
  for (uint64_t i = 0; i < chunks; ++i) {
    const std::vector<uint32_t> placed = ckptfs::ReplicaServers(attr->layout(), i);
    ASSERT_EQ(placed.size(), 2u);
    ASSERT_NE(placed[0], placed[1]);
    std::set<int> holders;
    for (int s = 0; s < 3; ++s) {
      if (HasChunkFile(s, attr->ino(), i)) holders.insert(s);
    }
    EXPECT_EQ(holders, (std::set<int>{index.at(placed[0]), index.at(placed[1])})) << "chunk " << i;
  }
  absl::StatusOr<std::string> back = ReadFile(*client_, attr->ino());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameBytes(*back, data));
}

TEST_F(ReplicationTest, ClosedFilesReadBackWithAnyOneServerKilled) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, 2));
  std::vector<std::pair<uint64_t, std::string>> files;
  for (int f = 0; f < 4; ++f) {
    const std::string data = TestData(kFileSize + static_cast<size_t>(f) * 7919, 10 + f);
    absl::StatusOr<meta::Attr> attr = WriteFile(*client_, dir_, absl::StrCat("f", f), data);
    ASSERT_TRUE(attr.ok()) << attr.status();
    files.emplace_back(attr->ino(), data);
  }
  for (int down = 0; down < 3; ++down) {
    SCOPED_TRACE(absl::StrCat("storage server ", down, " killed"));
    ASSERT_TRUE(cluster_->StopStorage(down, SIGKILL).ok());
    // A new Client: nothing cached, every chunk from the servers.
    std::unique_ptr<client::Client> reader = Connect();
    ASSERT_NE(reader, nullptr);
    for (const auto& [ino, data] : files) {
      absl::StatusOr<std::string> back = ReadFile(*reader, ino);
      ASSERT_TRUE(back.ok()) << "inode " << ino << ": " << back.status();
      EXPECT_TRUE(SameBytes(*back, data)) << "inode " << ino;
    }
    reader.reset();
    ASSERT_TRUE(cluster_->StartStorage(down).ok());
    ASSERT_TRUE(cluster_->WaitServersAlive(3).ok());
  }
}

TEST_F(ReplicationTest, AMountReadsEveryFileWithOneServerKilled) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, 2));
  absl::StatusOr<std::string> writer = cluster_->Mount("writer");
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<std::string> datas;
  for (int f = 0; f < 3; ++f) {
    datas.push_back(TestData(3 * (4u << 20) + 4096 * static_cast<size_t>(f) + 17, 20 + f));
    ASSERT_TRUE(WriteWholeFile(absl::StrCat(*writer, "/f", f), datas.back()).ok());
  }
  // The files are on the default 4 MiB chunks: chunk i of file f on
  // stripe[(i + r) % 3]; killing any server leaves a copy of each.
  for (int down : {1, 2}) {
    SCOPED_TRACE(absl::StrCat("storage server ", down, " killed"));
    ASSERT_TRUE(cluster_->StopStorage(down, SIGKILL).ok());
    // A fresh mount: neither the kernel's page cache nor the daemon's
    // read cache holds the files. Once reading over TCP as a remote node,
    // once reading the live servers' chunk files in place.
    for (const bool local : {false, true}) {
      SCOPED_TRACE(local ? "local reads" : "reads over TCP");
      absl::StatusOr<std::string> reader =
          cluster_->Mount(absl::StrCat("reader", down, local ? "-local" : ""),
                          {absl::StrCat("--local_reads=", local ? "true" : "false")});
      ASSERT_TRUE(reader.ok()) << reader.status();
      for (int f = 0; f < 3; ++f) {
        absl::StatusOr<std::string> back = ReadWholeFile(absl::StrCat(*reader, "/f", f));
        ASSERT_TRUE(back.ok()) << back.status();
        EXPECT_TRUE(SameBytes(*back, datas[static_cast<size_t>(f)])) << "f" << f;
      }
      ASSERT_TRUE(cluster_->Unmount(*reader).ok());
    }
    ASSERT_TRUE(cluster_->StartStorage(down).ok());
    ASSERT_TRUE(cluster_->WaitServersAlive(3).ok());
  }
}

TEST_F(ReplicationTest, ADirectorySettingGivesItsFilesCopies) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, 1));
  absl::StatusOr<meta::Attr> single = WriteFile(*client_, dir_, "single", TestData(kChunk, 1));
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_LE(single->layout().replicas(), 1u);

  auto twice = client_->Mkdir(dir_, "twice", 0755, 0, 0);
  ASSERT_TRUE(twice.ok()) << twice.status();
  ASSERT_TRUE(client_->SetXattr(twice->ino(), "user.ckptfs.replicas", "2", 0).ok());
  for (const char* bad : {"0", "9", "two", ""}) {
    absl::Status refused = client_->SetXattr(twice->ino(), "user.ckptfs.replicas", bad, 0);
    EXPECT_EQ(ErrnoFromStatus(refused), EINVAL) << "\"" << bad << "\": " << refused;
  }
  auto value = client_->GetXattr(twice->ino(), "user.ckptfs.replicas", 0);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "2");

  const std::string data = TestData(4 * kChunk, 2);
  absl::StatusOr<meta::Attr> attr = WriteFile(*client_, twice->ino(), "f", data);
  ASSERT_TRUE(attr.ok()) << attr.status();
  EXPECT_EQ(attr->layout().replicas(), 2u);
  EXPECT_EQ(attr->layout().chunk_size(), kChunk);  // the chunk size still inherited
  for (uint64_t i = 0; i < 4; ++i) {
    int copies = 0;
    for (int s = 0; s < 3; ++s) copies += HasChunkFile(s, attr->ino(), i) ? 1 : 0;
    EXPECT_EQ(copies, 2) << "chunk " << i;
  }
  // The one-copy file has one.
  int copies = 0;
  for (int s = 0; s < 3; ++s) copies += HasChunkFile(s, single->ino(), 0) ? 1 : 0;
  EXPECT_EQ(copies, 1);
  // And its data survives a server.
  const std::map<uint32_t, int> index = ServerIndexes();
  ASSERT_TRUE(
      cluster_->StopStorage(index.at(client::ServerForChunk(attr->layout(), 0)), SIGKILL).ok());
  std::unique_ptr<client::Client> reader = Connect();
  absl::StatusOr<std::string> back = ReadFile(*reader, attr->ino());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameBytes(*back, data));
}

TEST_F(ReplicationTest, TooFewServersForTheCopiesFailsTheCreate) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, 2));
  auto dir = client_->Mkdir(dir_, "four", 0755, 0, 0);
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_TRUE(client_->SetXattr(dir->ino(), "user.ckptfs.replicas", "4", 0).ok());
  absl::StatusOr<meta::Attr> attr = WriteFile(*client_, dir->ino(), "f", "x");
  ASSERT_FALSE(attr.ok());
  EXPECT_EQ(ErrnoFromStatus(attr.status()), ENOSPC) << attr.status();
  EXPECT_TRUE(absl::StrContains(attr.status().message(), "4 replicas")) << attr.status();
  EXPECT_TRUE(absl::StrContains(attr.status().message(), "only 3 storage servers are alive"))
      << attr.status();

  // Two of three servers down (and seen down): the cluster's 2 copies
  // cannot be placed either.
  ASSERT_TRUE(cluster_->StopStorage(1, SIGKILL).ok());
  ASSERT_TRUE(cluster_->StopStorage(2, SIGKILL).ok());
  absl::StatusOr<meta::Attr> later;
  for (int attempt = 0; attempt < 300; ++attempt) {  // until the service sees them down (30 s)
    later = WriteFile(*client_, dir_, absl::StrCat("g", attempt), "y");
    if (!later.ok() && ErrnoFromStatus(later.status()) == ENOSPC) break;
    ::usleep(100 * 1000);
  }
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(ErrnoFromStatus(later.status()), ENOSPC) << later.status();
  EXPECT_TRUE(absl::StrContains(later.status().message(), "2 replicas")) << later.status();
  EXPECT_TRUE(absl::StrContains(later.status().message(), "only 1 storage server is alive"))
      << later.status();
}

TEST_F(ReplicationTest, CkptVerifyReportsADeletedCopy) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, 2));
  absl::StatusOr<std::string> mnt = cluster_->Mount("m");
  ASSERT_TRUE(mnt.ok()) << mnt.status();
  const std::string dir = *mnt + "/d";
  ASSERT_TRUE(WriteWholeFile(dir + "/shard.bin", TestData(kFileSize, 3)).ok());
  const std::string verify = absl::StrCat(ckptfs::testing::BinDir(), "/ckptfs ckpt verify ", dir,
                                          " --meta ", cluster_->meta_address(), " 2>&1");
  std::string output;
  EXPECT_EQ(RunShell(verify, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "all intact")) << output;

  struct stat st;
  ASSERT_EQ(::stat((dir + "/shard.bin").c_str(), &st), 0);
  int deleted_from = -1;
  for (int s = 0; s < 3 && deleted_from < 0; ++s) {
    if (HasChunkFile(s, st.st_ino, 2)) {
      ASSERT_EQ(::unlink(ChunkPath(s, st.st_ino, 2).c_str()), 0);
      deleted_from = s;
    }
  }
  ASSERT_GE(deleted_from, 0) << "no copy of chunk 2 on any server";
  EXPECT_NE(RunShell(verify, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "BAD  shard.bin")) << output;
  EXPECT_TRUE(absl::StrContains(output, "chunk 2: 1 of 2 copies missing")) << output;
  EXPECT_TRUE(absl::StrContains(output, "1 file BAD (1 chunk)")) << output;
  // The file itself still reads whole from the other copy.
  absl::StatusOr<std::string> back = ReadWholeFile(dir + "/shard.bin");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameBytes(*back, TestData(kFileSize, 3)));
}

// A server that lost a chunk file gets the whole chunk rebuilt on a partial
// write of it, never a new chunk with zeros before the written bytes where
// the other copy holds data.
TEST_F(ReplicationTest, APartialWriteRebuildsACopyThatLostItsChunk) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, 2));
  std::string data = TestData(3 * kChunk, 11);
  absl::StatusOr<meta::Attr> attr = WriteFile(*client_, dir_, "f", data);
  ASSERT_TRUE(attr.ok()) << attr.status();
  std::vector<int> holders;
  for (int s = 0; s < 3; ++s) {
    if (HasChunkFile(s, attr->ino(), 1)) holders.push_back(s);
  }
  ASSERT_EQ(holders.size(), 2u);
  ASSERT_EQ(::unlink(ChunkPath(holders[0], attr->ino(), 1).c_str()), 0);

  auto file = client_->Open(attr->ino(), O_RDWR);
  ASSERT_TRUE(file.ok()) << file.status();
  const std::string patch = "patched bytes";
  auto wrote = (*file)->Write(kChunk + 1000, patch.data(), patch.size());
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  ASSERT_TRUE((*file)->Close().ok());
  data.replace(kChunk + 1000, patch.size(), patch);

  // Both copies whole and the same (chunk files hold no timestamps).
  absl::StatusOr<std::string> a =
      ckptfs::testing::ReadWholeFile(ChunkPath(holders[0], attr->ino(), 1));
  absl::StatusOr<std::string> b =
      ckptfs::testing::ReadWholeFile(ChunkPath(holders[1], attr->ino(), 1));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(SameBytes(*a, *b));
  // Each copy alone serves the file.
  for (int down : holders) {
    ASSERT_TRUE(cluster_->StopStorage(down, SIGKILL).ok());
    std::unique_ptr<client::Client> reader = Connect();
    ASSERT_NE(reader, nullptr);
    absl::StatusOr<std::string> back = ReadFile(*reader, attr->ino());
    ASSERT_TRUE(back.ok()) << "server " << down << " down: " << back.status();
    EXPECT_TRUE(SameBytes(*back, data)) << "server " << down << " down";
    ASSERT_TRUE(cluster_->StartStorage(down).ok());
    ASSERT_TRUE(cluster_->WaitServersAlive(3).ok());
  }
}

TEST_F(ReplicationTest, SparseWritesMakeTheSameHolesOnEveryCopy) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(3, 2));
  auto created = client_->Create(dir_, "sparse", 0644, 0, 0, O_RDWR | O_CREAT);
  ASSERT_TRUE(created.ok()) << created.status();
  const uint64_t ino = created->attr.ino();
  std::string want;
  // In a chunk no one wrote, then further on in it, then in the chunk before.
  for (uint64_t at : {uint64_t{kChunk} + 100, uint64_t{2} * kChunk + 40, uint64_t{5000}}) {
    const std::string bytes = absl::StrCat("bytes at ", at);
    want.resize(std::max<size_t>(want.size(), at + bytes.size()), '\0');
    want.replace(at, bytes.size(), bytes);
    auto wrote = created->file->Write(at, bytes.data(), bytes.size());
    ASSERT_TRUE(wrote.ok()) << wrote.status();
    ASSERT_TRUE(created->file->Fsync().ok());  // each write its own chunk WRITE
  }
  ASSERT_TRUE(created->file->Close().ok());
  for (uint64_t chunk = 0; chunk < 3; ++chunk) {
    std::vector<std::string> copies;
    for (int s = 0; s < 3; ++s) {
      if (!HasChunkFile(s, ino, chunk)) continue;
      absl::StatusOr<std::string> bytes = ckptfs::testing::ReadWholeFile(ChunkPath(s, ino, chunk));
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      copies.push_back(*bytes);
    }
    ASSERT_EQ(copies.size(), 2u) << "chunk " << chunk;
    EXPECT_TRUE(SameBytes(copies[0], copies[1])) << "chunk " << chunk;
  }
  std::unique_ptr<client::Client> reader = Connect();
  ASSERT_NE(reader, nullptr);
  absl::StatusOr<std::string> back = ReadFile(*reader, ino);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameBytes(*back, want));
}

}  // namespace
}  // namespace ckptfs::replication
