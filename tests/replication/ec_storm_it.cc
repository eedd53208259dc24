// Erasure coding 4+2 on real processes: a storage
// server killed (-9) in the middle of a save storm; each writer's file
// either is saved whole (close returned 0, and every byte reads back while
// the server is down, decoded from the other fragments) or its writer got
// an error — never a silently short file; files saved before stay intact,
// even with a second server killed (m = 2 lost); once the servers are back
// new files are saved and read again.
#include <signal.h>

#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "tests/replication/replication_support.h"

namespace ckptfs::replication {
namespace {

using ckptfs::testing::TestData;

constexpr int kWriters = 4;
size_t FileSize(int writer, int n) {
  return 7 * kChunk + 3000 * static_cast<size_t>(writer) + 17 * static_cast<size_t>(n) + 5;
}
uint64_t Seed(int writer, int n) { return 5000 + 100 * static_cast<uint64_t>(writer) + n; }

TEST_F(ReplicationTest, ErasureCodedSavesSurviveAServerKilledMidStormAndTwoLost) {
  // 7 servers: 4+2 needs 6 alive for new files once one is killed.
  ASSERT_NO_FATAL_FAILURE(StartCluster(7, 1));
  ASSERT_TRUE(client_->SetXattr(dir_, "user.ckptfs.ec", "4+2", 0).ok());

  std::vector<std::pair<uint64_t, std::string>> before;
  for (int f = 0; f < 4; ++f) {
    const std::string data = TestData(FileSize(9, f), Seed(9, f));
    absl::StatusOr<meta::Attr> attr = WriteFile(*client_, dir_, absl::StrCat("before", f), data);
    ASSERT_TRUE(attr.ok()) << attr.status();
    ASSERT_EQ(attr->layout().ec_data(), 4u);
    ASSERT_EQ(attr->layout().ec_parity(), 2u);
    before.emplace_back(attr->ino(), data);
  }

  const Storm storm = RunStormKillingServer(
      2, kWriters, [](int w, int n) { return TestData(FileSize(w, n), Seed(w, n)); });
  ASSERT_TRUE(storm.kill.ok()) << storm.kill;

  auto check_all = [&](const std::string& when) {
    std::unique_ptr<client::Client> reader = Connect();
    ASSERT_NE(reader, nullptr);
    int ok = 0, failed = 0;
    for (const StormSave& s : storm.saves) {
      if (!s.result.ok()) {
        ++failed;
        EXPECT_NE(ErrnoFromStatus(s.result.status()), 0);
        continue;
      }
      ++ok;
      const std::string want = TestData(FileSize(s.writer, s.n), Seed(s.writer, s.n));
      absl::StatusOr<std::string> back = ReadFile(*reader, s.result->ino());
      ASSERT_TRUE(back.ok()) << when << ": w" << s.writer << "-" << s.n << ": " << back.status();
      EXPECT_TRUE(SameBytes(*back, want)) << when << ": w" << s.writer << "-" << s.n;
    }
    for (const auto& [ino, data] : before) {
      absl::StatusOr<std::string> back = ReadFile(*reader, ino);
      ASSERT_TRUE(back.ok()) << when << ": inode " << ino << ": " << back.status();
      EXPECT_TRUE(SameBytes(*back, data)) << when << ": inode " << ino;
    }
    std::cerr << "ec storm, " << when << ": " << storm.saves.size() << " saves, " << ok
              << " returned 0, " << failed << " returned an error; all read back exact\n";
  };
  ASSERT_NO_FATAL_FAILURE(check_all("one server down"));
  EXPECT_GE(storm.saved, 2 * kWriters);
  EXPECT_GT(storm.saved_after_kill, 0);  // new files avoid the dead server

  // A second server lost: m = 2, still every byte.
  ASSERT_TRUE(cluster_->StopStorage(5, SIGKILL).ok());
  ASSERT_NO_FATAL_FAILURE(check_all("two servers down"));

  // Back: new files are saved and read.
  ASSERT_TRUE(cluster_->StartStorage(2).ok());
  ASSERT_TRUE(cluster_->StartStorage(5).ok());
  ASSERT_TRUE(cluster_->WaitServersAlive(7).ok());
  const std::string data = TestData(3 * kChunk + 11, 777);
  absl::StatusOr<meta::Attr> fresh = WriteFile(*client_, dir_, "after", data);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::StatusOr<std::string> back = ReadFile(*client_, fresh->ino());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameBytes(*back, data));
  ASSERT_NO_FATAL_FAILURE(check_all("servers back"));
}

}  // namespace
}  // namespace ckptfs::replication
