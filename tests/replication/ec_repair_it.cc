// `ckptfs repair` and `ckptfs ckpt verify` on erasure-coded (4+2) files
// against real daemons (LocalCluster, 7 storage servers): one fragment's
// chunk file deleted on its server's disk and another's overwritten with
// garbage. `ckptfs ckpt verify` reports the chunks bad, naming the
// fragments; one `ckptfs repair` pass restores both (every fragment reads
// back exactly what it held before) and exits 0; a second pass rebuilds
// nothing; verify then says all intact, and the files read back exact.
// And a storage server stopped for good while a spare outside every stripe
// is back: `ckptfs repair --move-after-s 0` decodes the dead server's
// fragments onto the spare (each exactly what the dead one held), the
// stripes name the spare instead, and the files read back exact.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/placement.h"
#include "tests/replication/replication_support.h"

namespace ckptfs::replication {
namespace {

using ckptfs::testing::TestData;

class EcRepairIt : public ReplicationTest {
 protected:
  int RunCkptfs(const std::string& args, std::string* out) {
    out->clear();
    return ckptfs::testing::RunShell(
        absl::StrCat(ckptfs::testing::BinDir(), "/ckptfs ", args, " 2>&1"), out);
  }
};

TEST_F(EcRepairIt, RepairRestoresADeletedAndAGarbledFragmentAndVerifyAgrees) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(7, 1));
  ASSERT_TRUE(client_->SetXattr(dir_, "user.ckptfs.ec", "4+2", 0).ok());
  std::vector<std::string> data;
  std::vector<uint64_t> inos;
  for (int f = 0; f < 2; ++f) {
    data.push_back(TestData(3 * kChunk + 4321, 300 + f));
    auto attr = WriteFile(*client_, dir_, absl::StrCat("e", f), data.back());
    ASSERT_TRUE(attr.ok()) << attr.status();
    ASSERT_EQ(attr->layout().ec_data(), 4u);
    ASSERT_EQ(attr->layout().ec_parity(), 2u);
    inos.push_back(attr->ino());
  }
  const std::vector<std::map<uint32_t, std::string>> before0 = ReadEveryCopy(inos[0]);
  const std::vector<std::map<uint32_t, std::string>> before1 = ReadEveryCopy(inos[1]);
  ASSERT_EQ(before0.size(), 4u);
  for (const auto& chunk : before0) {
    for (const auto& [id, bytes] : chunk) ASSERT_NE(bytes[0], '!') << "server " << id;
  }

  // File e0, chunk 1: one fragment's chunk file goes. File e1, chunk 2: one
  // fragment's chunk file is overwritten with garbage.
  std::map<uint32_t, int> index_of = ServerIndexes();
  auto attr0 = client_->GetAttr(inos[0]);
  auto attr1 = client_->GetAttr(inos[1]);
  ASSERT_TRUE(attr0.ok() && attr1.ok());
  const uint32_t deleted_id = ReplicaServers(attr0->layout(), 1)[2];
  const uint32_t garbled_id = ReplicaServers(attr1->layout(), 2)[5];
  ASSERT_EQ(::unlink(ChunkPath(index_of.at(deleted_id), inos[0], 1).c_str()), 0);
  {
    const std::string path = ChunkPath(index_of.at(garbled_id), inos[1], 2);
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    const std::string garbage = TestData(static_cast<size_t>(st.st_size), 9);
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, garbage.data(), garbage.size(), 0),
              static_cast<ssize_t>(garbage.size()));
    ::close(fd);
  }
  EXPECT_EQ(ReadEveryCopy(inos[0])[1].at(deleted_id), absl::StrCat("!", ENOENT));
  EXPECT_EQ(ReadEveryCopy(inos[1])[2].at(garbled_id)[0], '!');

  absl::StatusOr<std::string> mnt = cluster_->Mount("m");
  ASSERT_TRUE(mnt.ok()) << mnt.status();
  const std::string verify =
      absl::StrCat("ckpt verify ", *mnt, "/d --meta ", cluster_->meta_address());
  std::string output;
  EXPECT_NE(RunCkptfs(verify, &output), 0) << output;
  EXPECT_TRUE(
      absl::StrContains(output, absl::StrCat("fragment 3 of 6 (storage server ", deleted_id, ")")))
      << output;
  EXPECT_TRUE(
      absl::StrContains(output, absl::StrCat("fragment 6 of 6 (storage server ", garbled_id, ")")))
      << output;

  const std::string repair =
      absl::StrCat("repair --meta ", cluster_->meta_address(), " --credential-file ",
                   cluster_->server_credential_file());
  EXPECT_EQ(RunCkptfs(repair, &output), 0) << output;
  std::cerr << output;
  EXPECT_TRUE(absl::StrContains(output, "2 copies rebuilt")) << output;
  EXPECT_TRUE(absl::StrContains(output, "0 files unrepairable")) << output;
  EXPECT_TRUE(HasChunkFile(index_of.at(deleted_id), inos[0], 1));
  EXPECT_EQ(ReadEveryCopy(inos[0]), before0);
  EXPECT_EQ(ReadEveryCopy(inos[1]), before1);

  EXPECT_EQ(RunCkptfs(repair, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "0 copies rebuilt")) << output;

  EXPECT_EQ(RunCkptfs(verify, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "all intact")) << output;

  std::unique_ptr<client::Client> fresh = Connect();
  ASSERT_NE(fresh, nullptr);
  for (size_t f = 0; f < inos.size(); ++f) {
    auto got = ReadFile(*fresh, inos[f]);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(SameBytes(*got, data[f])) << "file e" << f;
  }
}

TEST_F(EcRepairIt, ADeadServersFragmentsAreDecodedOntoASpare) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(8, 1));
  std::map<uint32_t, int> index_of = ServerIndexes();
  ASSERT_EQ(index_of.size(), 8u);
  std::map<int, uint32_t> id_of;
  std::set<uint32_t> all;
  for (const auto& [id, index] : index_of) {
    id_of[index] = id;
    all.insert(id);
  }
  // Server 7 is down while the files are written: the stripes hold 0..6.
  ASSERT_TRUE(cluster_->StopStorage(7, SIGTERM).ok());
  std::set<uint32_t> alive = all;
  alive.erase(id_of[7]);
  ASSERT_NO_FATAL_FAILURE(WaitAlive(alive));
  ASSERT_TRUE(client_->SetXattr(dir_, "user.ckptfs.ec", "4+2", 0).ok());
  std::vector<std::string> data;
  std::vector<uint64_t> inos;
  std::vector<std::vector<std::map<uint32_t, std::string>>> before;
  for (int f = 0; f < 3; ++f) {
    data.push_back(TestData(2 * kChunk + 999 * f + 1, 400 + f));
    auto attr = WriteFile(*client_, dir_, absl::StrCat("g", f), data.back());
    ASSERT_TRUE(attr.ok()) << attr.status();
    ASSERT_EQ(attr->layout().ec_data(), 4u);
    inos.push_back(attr->ino());
    const auto& stripe = attr->layout().stripe();
    ASSERT_EQ(std::count(stripe.begin(), stripe.end(), id_of[7]), 0);
    ASSERT_EQ(std::count(stripe.begin(), stripe.end(), id_of[1]), 1)
        << "the test wants server 1 in every stripe";
    before.push_back(ReadEveryCopy(inos.back()));
  }

  // Server 1 goes for good; server 7 comes back.
  ASSERT_TRUE(cluster_->StopStorage(1, SIGKILL).ok());
  ASSERT_TRUE(cluster_->StartStorage(7).ok());
  alive = all;
  alive.erase(id_of[1]);
  ASSERT_NO_FATAL_FAILURE(WaitAlive(alive));

  std::string output;
  EXPECT_EQ(RunCkptfs(absl::StrCat("repair --move-after-s 0 --meta ", cluster_->meta_address(),
                                   " --credential-file ", cluster_->server_credential_file()),
                      &output),
            0)
      << output;
  std::cerr << output;
  EXPECT_FALSE(absl::StrContains(output, " 0 copies moved")) << output;
  EXPECT_TRUE(absl::StrContains(output, "0 files unrepairable")) << output;
  for (size_t f = 0; f < inos.size(); ++f) {
    auto attr = client_->GetAttr(inos[f]);
    ASSERT_TRUE(attr.ok()) << attr.status();
    const auto& stripe = attr->layout().stripe();
    EXPECT_EQ(std::count(stripe.begin(), stripe.end(), id_of[1]), 0) << "file g" << f;
    EXPECT_EQ(std::count(stripe.begin(), stripe.end(), id_of[7]), 1) << "file g" << f;
    // Every fragment is where the stripe says, with the bytes it had (the
    // dead server's now on the spare).
    const std::vector<std::map<uint32_t, std::string>> after = ReadEveryCopy(inos[f]);
    ASSERT_EQ(after.size(), before[f].size());
    for (size_t i = 0; i < after.size(); ++i) {
      for (const auto& [id, bytes] : before[f][i]) {
        const uint32_t now_on = id == id_of[1] ? id_of[7] : id;
        ASSERT_EQ(after[i].count(now_on), 1u) << "file g" << f << " chunk " << i;
        EXPECT_EQ(after[i].at(now_on), bytes)
            << "file g" << f << " chunk " << i << " server " << now_on;
      }
    }
  }
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
