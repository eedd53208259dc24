// kill -9 of the metadata service and of a storage server, then restart:
// everything closed before is intact, and the cluster goes on working; the
// metadata service killed and restarted in the middle of a save storm (two
// replicas): the writers carry on (their calls wait for the service within
// their deadline), every file whose close succeeded reads back exact, and
// no file holds a byte that was not written.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

struct Saved {
  std::string path;
  std::string data;
};

std::vector<Saved> SaveSome(const std::string& dir, int count, uint64_t seed) {
  std::vector<Saved> saved;
  for (int i = 0; i < count; ++i) {
    Saved s{absl::StrCat(dir, "/rank_", i, ".pt"), TestData((3 << 20) * (i + 1) + i, seed + i)};
    EXPECT_TRUE(WriteWholeFile(s.path, s.data).ok()) << s.path;
    saved.push_back(std::move(s));
  }
  return saved;
}

void ExpectIntact(const std::vector<Saved>& saved) {
  for (const auto& s : saved) {
    auto back = ReadWholeFile(s.path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == s.data) << s.path;
  }
}

TEST(RestartTest, KillNineOfMetaAndStorageLosesNothingClosed) {
  auto cluster = LocalCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  LocalCluster& c = **cluster;
  auto mnt = c.Mount("mnt");
  ASSERT_TRUE(mnt.ok()) << mnt.status();
  ASSERT_EQ(::mkdir((*mnt + "/step_100").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((*mnt + "/step_100/empty_dir").c_str(), 0755), 0);
  std::vector<Saved> saved = SaveSome(*mnt + "/step_100", 4, 100);

  // The metadata service dies without warning and comes back.
  ASSERT_TRUE(c.StopMeta(SIGKILL).ok());
  ASSERT_TRUE(c.StartMeta().ok()) << c.DescribeLogs();
  ASSERT_TRUE(c.WaitServersAlive(4).ok()) << c.DescribeLogs();
  ExpectIntact(saved);
  struct stat st {};
  EXPECT_EQ(::stat((*mnt + "/step_100/empty_dir").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));

  // A storage server dies without warning and comes back.
  ASSERT_TRUE(c.StopStorage(1, SIGKILL).ok());
  ASSERT_TRUE(c.StartStorage(1).ok());
  ASSERT_TRUE(c.WaitServersAlive(4).ok()) << c.DescribeLogs();
  ExpectIntact(saved);

  // Remount (a fresh client) and check again, then keep working.
  ASSERT_TRUE(c.Unmount(*mnt).ok());
  mnt = c.Mount("mnt2");
  ASSERT_TRUE(mnt.ok()) << mnt.status();
  for (auto& s : saved) s.path.replace(0, s.path.find("/step_100"), *mnt);
  ExpectIntact(saved);
  std::vector<Saved> more = SaveSome(*mnt + "/step_100", 2, 200);
  ExpectIntact(more);
}

struct StormFile {
  int writer = 0;
  int n = 0;
  bool after_restart = false;  // begun after the service was back
  absl::Status closed;         // what write/close returned
};

size_t StormFileSize(int writer, int n) {
  return (5 << 20) + 4096 * static_cast<size_t>(writer) + 131 * static_cast<size_t>(n) + 3;
}
uint64_t StormSeed(int writer, int n) { return 5000 + 100 * static_cast<uint64_t>(writer) + n; }
std::string StormPath(const std::string& dir, int writer, int n) {
  return absl::StrCat(dir, "/w", writer, "_", n, ".pt");
}

TEST(RestartTest, MetaKilledAndRestartedDuringASaveStormWritersCarryOn) {
  constexpr int kWriters = 4;
  LocalClusterOptions options;
  options.meta_flags = {"--replicas=2"};
  auto cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  LocalCluster& c = **cluster;
  auto mnt = c.Mount("mnt");
  ASSERT_TRUE(mnt.ok()) << mnt.status();
  const std::string dir = *mnt + "/storm";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);

  std::atomic<bool> restarted{false};
  std::atomic<bool> stop{false};
  std::atomic<int> begun_before_kill{0};
  std::atomic<int> saved_after_restart{0};
  absl::Mutex mu;
  std::vector<StormFile> files;  // guarded by mu
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int n = 0; !stop.load(); ++n) {
        StormFile f{w, n, restarted.load(), absl::OkStatus()};
        if (!f.after_restart) begun_before_kill.fetch_add(1);
        f.closed =
            WriteWholeFile(StormPath(dir, w, n), TestData(StormFileSize(w, n), StormSeed(w, n)));
        if (f.after_restart && f.closed.ok()) saved_after_restart.fetch_add(1);
        absl::MutexLock lock(&mu);
        files.push_back(std::move(f));
      }
    });
  }
  struct JoinOnExit {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~JoinOnExit() {
      stop.store(true);
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } joined{stop, writers};

  // Kill while every writer is in the middle of its files.
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (begun_before_kill.load() < 2 * kWriters && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(c.StopMeta(SIGKILL).ok());
  absl::SleepFor(absl::Seconds(2));  // the writers' calls meet a dead service
  ASSERT_TRUE(c.StartMeta().ok()) << c.DescribeLogs();
  restarted.store(true);
  while (saved_after_restart.load() < 2 * kWriters && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  stop.store(true);
  for (auto& t : writers) t.join();
  ASSERT_GE(saved_after_restart.load(), 2 * kWriters) << "the storm did not carry on\n"
                                                      << c.DescribeLogs();

  // Every file: if its close succeeded, whole and exact; otherwise never
  // a byte that was not written (a prefix of what was, at most). Checked
  // through the mount and through a fresh one (no cached state).
  auto mnt2 = c.Mount("mnt2");
  ASSERT_TRUE(mnt2.ok()) << mnt2.status();
  int failed = 0;
  for (const StormFile& f : files) {
    const std::string expected = TestData(StormFileSize(f.writer, f.n), StormSeed(f.writer, f.n));
    if (!f.closed.ok()) ++failed;
    for (const std::string& root : {dir, *mnt2 + "/storm"}) {
      absl::StatusOr<std::string> back = ReadWholeFile(StormPath(root, f.writer, f.n));
      if (f.closed.ok()) {
        ASSERT_TRUE(back.ok()) << StormPath(root, f.writer, f.n) << ": " << back.status();
        EXPECT_TRUE(*back == expected) << StormPath(root, f.writer, f.n) << " differs";
      } else if (back.ok()) {
        EXPECT_LE(back->size(), expected.size()) << StormPath(root, f.writer, f.n);
        EXPECT_TRUE(expected.compare(0, back->size(), *back) == 0)
            << StormPath(root, f.writer, f.n) << " (close failed: " << f.closed
            << ") holds bytes that were not written";
      }
    }
  }
  // Calls wait for the service within their 30 s deadline, so a 2 s outage
  // fails no save.
  EXPECT_EQ(failed, 0) << "of " << files.size() << " saves";
  std::cout << "storm: " << files.size() << " saves, " << failed << " failed, "
            << saved_after_restart.load() << " saved after the restart\n";
}

}  // namespace
}  // namespace ckptfs::testing
