// A storage server killed (-9) in the middle of a save storm, with two
// replicas: each writer's file either is saved whole (close returned 0, and
// every byte reads back, with the server still down) or its writer got an
// error from write or close — never a silently short file; every file
// saved before the kill stays intact; once the server is back the cluster
// takes new files again, and `ckptfs ckpt verify` finds every copy of every
// saved file (on the restarted server too) present and identical.
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "common/errno_status.h"
#include "common/metrics/metrics.h"
#include "tests/replication/replication_support.h"

namespace ckptfs::replication {
namespace {

using ckptfs::testing::TestData;

constexpr int kWriters = 6;
// Not a whole number of chunks, so a lost tail would show in the size.
size_t FileSize(int writer, int n) {
  return 9 * kChunk + 1000 * static_cast<size_t>(writer) + 31 * static_cast<size_t>(n) + 7;
}
uint64_t Seed(int writer, int n) { return 1000 * static_cast<uint64_t>(writer) + n; }

TEST_F(ReplicationTest, AServerKilledDuringASaveStormLosesNothingSaved) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(4, 2));

  // Saved before the storm.
  std::vector<std::pair<uint64_t, std::string>> before;
  for (int f = 0; f < 6; ++f) {
    const std::string data = TestData(FileSize(99, f), Seed(99, f));
    absl::StatusOr<meta::Attr> attr = WriteFile(*client_, dir_, absl::StrCat("before", f), data);
    ASSERT_TRUE(attr.ok()) << attr.status();
    before.emplace_back(attr->ino(), data);
  }

  // Kill server 1 once the storm is under way, then let it run on without
  // the server until the service has seen it down and saves go through
  // again (a deadline only in case they never do), and stop.
  const Storm storm = RunStormKillingServer(
      1, kWriters, [](int w, int n) { return TestData(FileSize(w, n), Seed(w, n)); });
  ASSERT_TRUE(storm.kill.ok()) << storm.kill;

  // With the server still down: every save that returned 0 reads back
  // whole, through a Client that caches nothing.
  std::unique_ptr<client::Client> reader = Connect();
  ASSERT_NE(reader, nullptr);
  int ok = 0, failed = 0, ok_after_kill = 0;
  for (const StormSave& a : storm.saves) {
    if (!a.result.ok()) {
      ++failed;
      // An error the writer can act on, never a silent one.
      EXPECT_NE(ErrnoFromStatus(a.result.status()), 0);
      continue;
    }
    ++ok;
    ok_after_kill += a.after_kill ? 1 : 0;
    const std::string want = TestData(FileSize(a.writer, a.n), Seed(a.writer, a.n));
    auto attr = reader->GetAttr(a.result->ino());
    ASSERT_TRUE(attr.ok()) << attr.status();
    EXPECT_EQ(attr->size(), want.size()) << "w" << a.writer << "-" << a.n;
    absl::StatusOr<std::string> back = ReadFile(*reader, a.result->ino());
    ASSERT_TRUE(back.ok()) << "w" << a.writer << "-" << a.n << ": " << back.status();
    EXPECT_TRUE(SameBytes(*back, want)) << "w" << a.writer << "-" << a.n;
  }
  std::cerr << "storm: " << storm.saves.size() << " saves, " << ok << " returned 0 ("
            << ok_after_kill << " begun after the kill), " << failed
            << " returned an error; saves succeeded again "
            << absl::FormatDuration(storm.first_save_after_kill)
            << " after the kill (the service's --server_timeout_s=3 and a heartbeat)\n";
  EXPECT_GE(ok, 2 * kWriters);
  // After the service saw the server down, new files avoid it and saves
  // succeed again.
  EXPECT_GT(ok_after_kill, 0);
  for (const auto& [ino, data] : before) {
    absl::StatusOr<std::string> back = ReadFile(*reader, ino);
    ASSERT_TRUE(back.ok()) << "inode " << ino << ": " << back.status();
    EXPECT_TRUE(SameBytes(*back, data)) << "inode " << ino;
  }
  // The same through a Client that reads the live servers' chunk files in
  // place: the dead server's chunks come from their other copies.
  metrics::Counter& local_reads =
      metrics::Registry::Default()
          .Counter("ckptfs_client_local_chunk_reads_total", "", {"result"})
          .WithLabels({"local"});
  std::unique_ptr<client::Client> local_reader = Connect(/*local_reads=*/true);
  ASSERT_NE(local_reader, nullptr);
  const uint64_t local_before = local_reads.value();
  for (const StormSave& a : storm.saves) {
    if (!a.result.ok()) continue;
    const std::string want = TestData(FileSize(a.writer, a.n), Seed(a.writer, a.n));
    absl::StatusOr<std::string> back = ReadFile(*local_reader, a.result->ino());
    ASSERT_TRUE(back.ok()) << "w" << a.writer << "-" << a.n << ": " << back.status();
    EXPECT_TRUE(SameBytes(*back, want)) << "w" << a.writer << "-" << a.n;
  }
  EXPECT_GT(local_reads.value(), local_before);

  // The server returns: the cluster serves, old files and new.
  ASSERT_TRUE(cluster_->StartStorage(1).ok());
  ASSERT_TRUE(cluster_->WaitServersAlive(4).ok());
  const std::string data = TestData(5 * kChunk + 3, 4242);
  absl::StatusOr<meta::Attr> fresh = WriteFile(*reader, dir_, "after", data);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->layout().stripe_size(), 4);
  absl::StatusOr<std::string> back = ReadFile(*reader, fresh->ino());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameBytes(*back, data));
  for (const auto& [ino, data] : before) {
    absl::StatusOr<std::string> again = ReadFile(*reader, ino);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(SameBytes(*again, data));
  }

  // Every copy, not just the one a read picks: a read above may have been
  // served by one good copy while another is missing, short or different.
  // The saves that failed may leave copies that differ (their writers were
  // told); they go, and `ckpt verify` reads every copy of every chunk of
  // the rest (common/placement.h) and compares them.
  for (const StormSave& a : storm.saves) {
    if (a.result.ok()) continue;
    absl::Status gone = reader->Unlink(dir_, absl::StrCat("w", a.writer, "-", a.n));
    EXPECT_TRUE(gone.ok() || ErrnoFromStatus(gone) == ENOENT) << gone;
  }
  absl::StatusOr<std::string> mnt = cluster_->Mount("m");
  ASSERT_TRUE(mnt.ok()) << mnt.status();
  const std::string verify = absl::StrCat(ckptfs::testing::BinDir(), "/ckptfs ckpt verify ", *mnt,
                                          "/d --meta ", cluster_->meta_address(), " 2>&1");
  std::string output;
  EXPECT_EQ(ckptfs::testing::RunShell(verify, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "all intact")) << output;
  const int files = ok + static_cast<int>(before.size()) + 1;
  EXPECT_TRUE(absl::StrContains(output, absl::StrCat("verified ", files, " files")))
      << "want " << files << " files verified: " << output;
}

}  // namespace
}  // namespace ckptfs::replication
