// `ckptfs repair` against real daemons: R=2 on a
// LocalCluster.
//  - One chunk file deleted on one server's disk and another overwritten
//    with garbage: one `ckptfs repair` pass restores both (the chunk files
//    are there again, every copy of every chunk reads back the bytes
//    written) and exits 0.
//  - A storage server stopped for good while a spare (one that was down
//    when the files were written, so outside every stripe) is back:
//    `ckptfs repair --move-after-s 0` moves the dead server's copies onto
//    it: no stripe names the dead server, every chunk has two good copies
//    on live servers, and the files read back exact.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/blocking_chunk_transport.h"
#include "client/grpc_meta_client.h"
#include "common/errno_status.h"
#include "common/placement.h"
#include "tests/replication/replication_support.h"

namespace ckptfs::replication {
namespace {

using ckptfs::testing::TestData;

class RepairIt : public ReplicationTest {
 protected:
  // `ckptfs repair --meta <service> <extra>`: its exit status; output in *out.
  int RunRepair(const std::string& extra, std::string* out) {
    const std::string command = absl::StrCat(
        ckptfs::testing::BinDir(), "/ckptfs repair --meta ", cluster_->meta_address(),
        " --credential-file ", cluster_->server_credential_file(), " ", extra, " 2>&1");
    return ckptfs::testing::RunShell(command, out);
  }

  // Every copy of every chunk of file `ino` (read through the data protocol
  // from each server its layout names) equals the bytes of `want` there;
  // every copy's server is alive.
  void ExpectEveryCopy(uint64_t ino, const std::string& want) {
    auto attr = client_->GetAttr(ino);
    ASSERT_TRUE(attr.ok()) << attr.status();
    ASSERT_EQ(attr->size(), want.size());
    const meta::Layout& layout = attr->layout();
    ASSERT_EQ(ReplicaCount(layout), 2);
    const std::vector<std::map<uint32_t, std::string>> copies = ReadEveryCopy(ino);
    ASSERT_EQ(copies.size(), client::ChunkCount(want.size(), layout.chunk_size()));
    for (uint64_t i = 0; i < copies.size(); ++i) {
      const std::string slice = want.substr(i * layout.chunk_size(), layout.chunk_size());
      for (const auto& [id, bytes] : copies[i]) {
        // A failed read is "!" and its errno.
        EXPECT_TRUE(SameBytes(bytes, slice)) << "inode " << ino << " chunk " << i << " on server "
                                             << id << (bytes.size() < 8 ? ": " + bytes : "");
      }
    }
  }

  // The first server index holding a chunk file of chunk `chunk` of `ino`,
  // or -1.
  int Holder(uint64_t ino, uint64_t chunk) {
    for (int s = 0; s < cluster_->storage_servers(); ++s) {
      if (HasChunkFile(s, ino, chunk)) return s;
    }
    return -1;
  }
};

TEST_F(RepairIt, OnePassRestoresADeletedAndACorruptedCopy) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(4, 2));
  std::vector<std::string> data;
  std::vector<uint64_t> inos;
  for (int f = 0; f < 3; ++f) {
    data.push_back(TestData(5 * kChunk + 1234, 100 + f));
    auto attr = WriteFile(*client_, dir_, absl::StrCat("f", f), data.back());
    ASSERT_TRUE(attr.ok()) << attr.status();
    inos.push_back(attr->ino());
  }
  // File 0, chunk 1: one copy's chunk file goes.
  const int deleted_on = Holder(inos[0], 1);
  ASSERT_GE(deleted_on, 0);
  ASSERT_EQ(::unlink(ChunkPath(deleted_on, inos[0], 1).c_str()), 0);
  // File 1, chunk 2: one copy's chunk file is overwritten with garbage.
  const int corrupted_on = Holder(inos[1], 2);
  ASSERT_GE(corrupted_on, 0);
  const std::string path = ChunkPath(corrupted_on, inos[1], 2);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  {
    const std::string garbage = TestData(static_cast<size_t>(st.st_size), 7);
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, garbage.data(), garbage.size(), 0),
              static_cast<ssize_t>(garbage.size()));
    ::close(fd);
  }

  // Both damaged copies fail to read before the repair.
  std::map<int, uint32_t> id_of;
  for (const auto& [id, index] : ServerIndexes()) id_of[index] = id;
  {
    client::GrpcMetaClient meta(cluster_->meta_address(), absl::Seconds(10),
                                cluster_->credential());
    client::BlockingChunkTransport transport(&meta, absl::Seconds(10), cluster_->credential());
    std::string buf(kChunk, '\0');
    absl::StatusOr<size_t> n =
        transport.ReadChunk(id_of[deleted_on], inos[0], 1, 0, buf.data(), buf.size());
    EXPECT_EQ(ErrnoFromStatus(n.status()), ENOENT) << n.status();
    n = transport.ReadChunk(id_of[corrupted_on], inos[1], 2, 0, buf.data(), buf.size());
    EXPECT_FALSE(n.ok());
  }

  std::string output;
  EXPECT_EQ(RunRepair("", &output), 0) << output;
  std::cerr << output;
  EXPECT_TRUE(absl::StrContains(output, "2 copies rebuilt")) << output;
  EXPECT_TRUE(absl::StrContains(output, "0 files unrepairable")) << output;
  EXPECT_TRUE(HasChunkFile(deleted_on, inos[0], 1));
  for (size_t f = 0; f < inos.size(); ++f) ExpectEveryCopy(inos[f], data[f]);

  // Nothing left to do: a second pass rebuilds nothing.
  EXPECT_EQ(RunRepair("", &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "0 copies rebuilt")) << output;
}

TEST_F(RepairIt, ADeadServersCopiesMoveToASpare) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(5, 2));
  std::map<uint32_t, int> index_of = ServerIndexes();
  ASSERT_EQ(index_of.size(), 5u);
  std::map<int, uint32_t> id_of;
  for (const auto& [id, index] : index_of) id_of[index] = id;
  std::set<uint32_t> all;
  for (const auto& [id, index] : index_of) all.insert(id);

  // Server 4 is down while the files are written: the stripes hold 0..3.
  ASSERT_TRUE(cluster_->StopStorage(4, SIGTERM).ok());
  std::set<uint32_t> alive = all;
  alive.erase(id_of[4]);
  ASSERT_NO_FATAL_FAILURE(WaitAlive(alive));
  std::vector<std::string> data;
  std::vector<uint64_t> inos;
  for (int f = 0; f < 4; ++f) {
    data.push_back(TestData(3 * kChunk + 777 * f + 1, 200 + f));
    auto attr = WriteFile(*client_, dir_, absl::StrCat("g", f), data.back());
    ASSERT_TRUE(attr.ok()) << attr.status();
    inos.push_back(attr->ino());
    const auto& stripe = attr->layout().stripe();
    ASSERT_EQ(std::count(stripe.begin(), stripe.end(), id_of[4]), 0);
    ASSERT_EQ(std::count(stripe.begin(), stripe.end(), id_of[1]), 1)
        << "the test wants server 1 in every stripe";
  }

  // Server 1 goes for good; server 4 comes back.
  ASSERT_TRUE(cluster_->StopStorage(1, SIGKILL).ok());
  ASSERT_TRUE(cluster_->StartStorage(4).ok());
  alive = all;
  alive.erase(id_of[1]);
  ASSERT_NO_FATAL_FAILURE(WaitAlive(alive));

  std::string output;
  EXPECT_EQ(RunRepair("--move-after-s 0", &output), 0) << output;
  std::cerr << output;
  EXPECT_FALSE(absl::StrContains(output, " 0 copies moved")) << output;
  for (size_t f = 0; f < inos.size(); ++f) {
    auto attr = client_->GetAttr(inos[f]);
    ASSERT_TRUE(attr.ok()) << attr.status();
    const auto& stripe = attr->layout().stripe();
    EXPECT_EQ(std::count(stripe.begin(), stripe.end(), id_of[1]), 0) << "file g" << f;
    EXPECT_EQ(std::count(stripe.begin(), stripe.end(), id_of[4]), 1) << "file g" << f;
    ExpectEveryCopy(inos[f], data[f]);
  }
  // A fresh client reads every file back exact.
  std::unique_ptr<client::Client> fresh = Connect();
  ASSERT_NE(fresh, nullptr);
  for (size_t f = 0; f < inos.size(); ++f) {
    auto got = ReadFile(*fresh, inos[f]);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameBytes(*got, data[f])) << "file g" << f;
  }
}

}  // namespace
}  // namespace ckptfs::replication
