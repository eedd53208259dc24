// The synchronized-commit barrier end to end: real rank processes write a
// checkpoint through the mount and commit it with the ckptfs Python module; the
// barrier releases them together, or aborts the checkpoint for all of them —
// after a timeout, a file still open for writing or a failed write — and a
// metadata service killed while ranks wait never leaves a checkpoint
// half-committed.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/checkpoint_support.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

using CheckpointCommitTest = CheckpointTest;

constexpr char kThreeMiB[] = "3145728";

// The inode numbers of the files in `dir`.
std::vector<uint64_t> FileInos(const std::string& dir) {
  std::vector<uint64_t> inos;
  for (const std::string& name : ListNames(dir)) inos.push_back(InoOf(dir + "/" + name));
  return inos;
}

// N ranks commit; all return 0 together, a retry of a rank (a
// second process, a second call, an interrupted wait) waits for the same
// outcome, the checkpoint is durable through one sync per storage server,
// `latest` names it, and it survives kill -9 of every daemon.
TEST_F(CheckpointCommitTest, AllRanksCommitTogetherDurablyAndLatestNamesIt) {
  constexpr int kRanks = 4;
  const std::string ckpt = RunDir() + "/step_100";
  std::string out;
  ASSERT_EQ(Ckptfs(absl::StrCat("ckpt declare ", ckpt, " ", kRanks), &out), 0) << out;
  EXPECT_EQ(StateOf(ckpt), "pending");
  const std::vector<std::string> save = {"--files", "2", "--bytes", kThreeMiB};

  // Ranks 0..2, and rank 0 a second time from another process; rank 0 also
  // commits twice. None may return while rank 3 has not committed.
  std::vector<std::unique_ptr<RankProcess>> waiting;
  for (int r = 0; r < kRanks - 1; ++r) {
    std::vector<std::string> args = save;
    if (r == 0) args.push_back("--commit-twice");
    waiting.push_back(StartSave(ckpt, r, args));
  }
  waiting.push_back(StartSave(ckpt, 0, {"--files", "0"}));  // a retry writes nothing
  for (auto& p : waiting) ASSERT_TRUE(p->WaitReady()) << p->Log();
  ASSERT_TRUE(WaitFor(
      [&] {
        for (auto& p : waiting) {
          if (!BlockedInCommit(p->pid())) return false;
        }
        auto info = InfoOf(ckpt);
        return info && info->arrived() == kRanks - 1;
      },
      absl::Seconds(30)))
      << "arrived: " << (InfoOf(ckpt) ? InfoOf(ckpt)->arrived() : 0);
  // A retried rank counts once: with 3 of 4 arrived the barrier holds.
  EXPECT_EQ(StateOf(ckpt), "pending");
  for (auto& p : waiting) EXPECT_TRUE(p->Running());
  // An interrupt (EINTR) while waiting: Python retries the call, which
  // waits for the same outcome.
  ASSERT_EQ(::kill(waiting[1]->pid(), SIGUSR1), 0);

  // Count the syncs of every storage server while the last rank commits.
  std::vector<std::unique_ptr<SyscallTrace>> traces;
  std::string why;
  for (int i = 0; i < kStorageServers; ++i) {
    traces.push_back(
        SyscallTrace::Attach(cluster().storage_pid(i), "syncfs", cluster().root(), &why));
    if (traces.back() == nullptr) break;
  }
  auto last = StartSave(ckpt, kRanks - 1, save);
  waiting.push_back(std::move(last));
  for (auto& p : waiting) {
    RankResult r = p->Wait();
    ASSERT_TRUE(r.finished) << r.log;
    EXPECT_EQ(r.exit_status, 0) << r.log;
    EXPECT_EQ(r.result, "ok") << r.log;
    // Read by the rank right after its commit returned: never "pending".
    EXPECT_EQ(r.state, "committed") << r.log;
  }
  auto info = InfoOf(ckpt);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state(), meta::COMMITTED);
  EXPECT_EQ(info->ranks(), static_cast<uint64_t>(kRanks));
  EXPECT_EQ(info->arrived(), static_cast<uint64_t>(kRanks));
  EXPECT_EQ(info->files(), static_cast<uint64_t>(2 * kRanks));
  EXPECT_EQ(info->bytes(), static_cast<uint64_t>(2 * kRanks) * 3145728);

  // One whole-store sync per storage server holding a chunk of it (every
  // server: each 3 MiB file has a 1 MiB chunk on each), not one per file.
  if (traces.size() == static_cast<size_t>(kStorageServers) && traces.back() != nullptr) {
    std::set<int> holders;
    for (uint64_t ino : FileInos(ckpt)) {
      for (int i = 0; i < kStorageServers; ++i) {
        if (!ListNames(absl::StrCat(cluster().storage_dir(i), "/chunks/", ino)).empty()) {
          holders.insert(i);
        }
      }
    }
    EXPECT_EQ(holders.size(), static_cast<size_t>(kStorageServers));
    for (int i = 0; i < kStorageServers; ++i) {
      EXPECT_EQ(traces[i]->StopAndCount("syncfs"), holders.count(i) ? 1 : 0)
          << "storage server " << i;
    }
  } else {
    ADD_FAILURE() << "cannot count the storage servers' syncs: " << why;
  }

  // `latest` names it: the symlink, the attribute, the module, the listing.
  char target[256] = {};
  ASSERT_GT(::readlink((RunDir() + "/latest").c_str(), target, sizeof(target) - 1), 0)
      << strerror(errno);
  EXPECT_STREQ(target, "step_100");
  EXPECT_EQ(LatestOf(RunDir()), "step_100");
  EXPECT_EQ(ListNames(RunDir()), (std::vector<std::string>{"latest", "step_100"}));
  EXPECT_EQ(Verify(ckpt, {"--ranks", "4", "--files", "2", "--bytes", kThreeMiB}), "VERIFY ok\n");
  // A commit of a committed checkpoint returns at once with the same outcome.
  out.clear();
  EXPECT_EQ(Ckptfs(absl::StrCat("ckpt commit ", ckpt, " 2"), &out), 0) << out;

  // Durable: every daemon dies without warning and comes back.
  ASSERT_TRUE(cluster().StopMeta(SIGKILL).ok());
  for (int i = 0; i < kStorageServers; ++i) ASSERT_TRUE(cluster().StopStorage(i, SIGKILL).ok());
  ASSERT_TRUE(cluster().StartMeta().ok()) << Logs();
  for (int i = 0; i < kStorageServers; ++i) ASSERT_TRUE(cluster().StartStorage(i).ok()) << Logs();
  ASSERT_TRUE(cluster().WaitServersAlive(kStorageServers).ok()) << Logs();
  EXPECT_TRUE(WaitFor([&] { return StateOf(ckpt) == "committed"; }, absl::Seconds(30)))
      << StateOf(ckpt);
  EXPECT_EQ(LatestOf(RunDir()), "step_100");
  EXPECT_EQ(Verify(ckpt, {"--ranks", "4", "--files", "2", "--bytes", kThreeMiB}), "VERIFY ok\n");
}

// A rank killed mid-save never commits; after the timeout every
// waiting commit fails with ETIMEDOUT, the checkpoint is aborted and emptied,
// its chunks are reclaimed, and `latest` still names the previous one.
TEST_F(CheckpointCommitTest, KilledRankTimesOutAndAbortsForEveryone) {
  ASSERT_TRUE(SaveCheckpoint(RunDir() + "/step_1", 1));
  const std::string ckpt = RunDir() + "/step_2";
  // Ranks 0 and 1 commit once `go` exists, made when both have written
  // their file: they arrive together, so that a short barrier timeout
  // cannot part them.
  const std::string go = cluster().root() + "/go-step_2";
  const std::vector<std::string> save = {"--declare", "3",       "--timeout-s",
                                         "3",         "--bytes", kThreeMiB};
  std::vector<std::unique_ptr<RankProcess>> ranks;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::string> args = save;
    if (r == 2) {
      args.push_back("--die-after-write");
    } else {
      args.insert(args.end(), {"--wait-file", go});
    }
    ranks.push_back(StartSave(ckpt, r, args));
  }
  ASSERT_TRUE(ranks[2]->WaitReady()) << ranks[2]->Log();
  // The closed files' chunks are on the storage servers.
  auto written = [&](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && st.st_size == std::stoll(kThreeMiB) &&
           ChunkFilesOf(cluster(), st.st_ino) > 0;
  };
  ASSERT_TRUE(
      WaitFor([&] { return written(ckpt + "/rank0_0.bin") && written(ckpt + "/rank1_0.bin"); },
              absl::Seconds(60)))
      << ranks[0]->Log() << ranks[1]->Log();
  const std::vector<uint64_t> inos = {InoOf(ckpt + "/rank0_0.bin"), InoOf(ckpt + "/rank1_0.bin"),
                                      InoOf(ckpt + "/rank2_0.bin")};
  ranks[2]->Kill();  // mid-save: its file was still open
  ASSERT_TRUE(WriteWholeFile(go, "").ok());

  for (int r = 0; r < 2; ++r) {
    RankResult result = ranks[r]->Wait();
    ASSERT_TRUE(result.finished) << result.log;
    EXPECT_EQ(result.result, "error") << result.log;
    EXPECT_EQ(result.errname, "ETIMEDOUT") << result.log;
    EXPECT_EQ(result.state, "aborted") << result.log;
  }
  auto info = InfoOf(ckpt);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state(), meta::ABORTED);
  EXPECT_EQ(info->abort_errno(), ETIMEDOUT);
  EXPECT_EQ(info->arrived(), 2u);
  EXPECT_FALSE(info->abort_reason().empty());
  EXPECT_EQ(LatestOf(RunDir()), "step_1");
  // Emptied, still reachable by name, hidden from the listing.
  EXPECT_EQ(ListNames(ckpt), std::vector<std::string>{});
  EXPECT_EQ(ListNames(RunDir()), (std::vector<std::string>{"latest", "step_1"}));
  for (uint64_t ino : inos) {
    EXPECT_TRUE(WaitFor([&] { return ChunkFilesOf(cluster(), ino) == 0; }, absl::Seconds(30)))
        << "chunks of inode " << ino << " were not reclaimed";
  }
  // The killed rank, restarted, learns the outcome with its errno and reason.
  std::string out;
  EXPECT_EQ(Ckptfs(absl::StrCat("ckpt commit ", ckpt, " 2"), &out), 1) << out;
  EXPECT_NE(out.find("Connection timed out (ETIMEDOUT)"), std::string::npos) << out;
  EXPECT_NE(out.find(info->abort_reason()), std::string::npos) << out;
}

// A rank commits with a file still open for writing:
// every rank's commit fails (EBUSY) and the checkpoint is aborted.
TEST_F(CheckpointCommitTest, FileStillOpenForWritingAbortsForEveryone) {
  const std::string ckpt = RunDir() + "/step_1";
  auto open_rank = StartSave(ckpt, 0, {"--declare", "2", "--hold-open"});
  auto good_rank = StartSave(ckpt, 1, {"--declare", "2"});
  for (RankProcess* p : {open_rank.get(), good_rank.get()}) {
    RankResult r = p->Wait();
    ASSERT_TRUE(r.finished) << r.log;
    EXPECT_EQ(r.result, "error") << r.log;
    EXPECT_EQ(r.errname, "EBUSY") << r.log;
    EXPECT_EQ(r.state, "aborted") << r.log;
  }
  auto info = InfoOf(ckpt);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state(), meta::ABORTED);
  EXPECT_EQ(info->abort_errno(), EBUSY);
  EXPECT_NE(info->abort_reason().find("rank0_0.bin"), std::string::npos) << info->abort_reason();
  EXPECT_NE(info->abort_reason().find("still open for writing"), std::string::npos)
      << info->abort_reason();
  EXPECT_EQ(ListNames(ckpt), std::vector<std::string>{});
  EXPECT_EQ(LatestOf(RunDir()), "");
}

// A write of a rank fails (its storage server died);
// the checkpoint aborts (EIO) for every rank, never committed short.
TEST_F(CheckpointCommitTest, FailedWriteAbortsForEveryone) {
  const std::string ckpt = RunDir() + "/step_1";
  auto waiting = StartSave(ckpt, 1, {"--declare", "2"});
  ASSERT_TRUE(waiting->WaitReady()) << waiting->Log();
  ASSERT_TRUE(WaitFor([&] { return BlockedInCommit(waiting->pid()); }, absl::Seconds(30)));
  // Server 0 dies; the metadata service still counts it alive for a while,
  // so the next file's stripe includes it and a 6 MiB write reaches it.
  ASSERT_TRUE(cluster().StopStorage(0, SIGKILL).ok());
  auto failing = StartSave(ckpt, 0, {"--declare", "2", "--bytes", "6291456", "--write-fails"});
  for (RankProcess* p : {failing.get(), waiting.get()}) {
    RankResult r = p->Wait();
    ASSERT_TRUE(r.finished) << r.log;
    EXPECT_EQ(r.result, "error") << r.log;
    EXPECT_EQ(r.errname, "EIO") << r.log;
    EXPECT_EQ(r.state, "aborted") << r.log;
  }
  EXPECT_NE(failing->Log().find("WRITE_FAILED"), std::string::npos)
      << "the write did not fail: " << failing->Log();
  auto info = InfoOf(ckpt);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state(), meta::ABORTED);
  EXPECT_EQ(info->abort_errno(), EIO);
  EXPECT_EQ(ListNames(ckpt), std::vector<std::string>{});
}

// The metadata service is killed (-9) and restarted while ranks
// wait, and again right as the last rank arrives. Every waiting commit
// completes or fails cleanly, all alike, and a watcher listing the run
// directory the whole time never sees a committed checkpoint incomplete.
TEST_F(CheckpointCommitTest, MetaRestartWhileRanksWaitNeverHalfCommits) {
  constexpr int kRanks = 4;
  const std::vector<std::string> save = {"--declare", "4", "--timeout-s", "120",
                                         "--files",   "2", "--bytes",     "524288"};
  ASSERT_TRUE(SaveCheckpoint(RunDir() + "/step_1", kRanks, save));
  const std::string stop_file = cluster().root() + "/stop-watching";
  auto watcher = StartRank({"watch", RunDir(), "--stop-file", stop_file, "--ranks", "4", "--files",
                            "2", "--bytes", "524288"});

  auto restart_meta = [&] {
    ASSERT_TRUE(cluster().StopMeta(SIGKILL).ok());
    ASSERT_TRUE(cluster().StartMeta().ok()) << Logs();
    ASSERT_TRUE(cluster().WaitServersAlive(kStorageServers).ok()) << Logs();
  };
  // All ranks of `ckpt` end alike; returns their common result.
  auto outcome = [&](std::vector<std::unique_ptr<RankProcess>>& ranks,
                     const std::string& ckpt) -> std::string {
    std::set<std::string> results;
    for (auto& p : ranks) {
      RankResult r = p->Wait(absl::Seconds(240));
      EXPECT_TRUE(r.finished) << r.log;
      EXPECT_EQ(r.exit_status, 0) << r.log;
      EXPECT_TRUE(r.result == "ok" || (r.result == "error" && !r.errname.empty())) << r.log;
      results.insert(r.result + " " + r.errname);
    }
    EXPECT_EQ(results.size(), 1u) << "ranks of " << ckpt << " ended differently";
    const std::string state = StateOf(ckpt);
    if (*results.begin() == "ok ") {
      EXPECT_EQ(state, "committed");
      EXPECT_EQ(Verify(ckpt, {"--ranks", "4", "--files", "2", "--bytes", "524288"}), "VERIFY ok\n");
    } else {
      EXPECT_EQ(state, "aborted");
      EXPECT_EQ(ListNames(ckpt), std::vector<std::string>{});
    }
    return *results.begin();
  };

  // Killed while three of four ranks wait: their arrivals are durable, so
  // the last rank's commit completes the checkpoint after the restart.
  {
    const std::string ckpt = RunDir() + "/step_2";
    std::vector<std::unique_ptr<RankProcess>> ranks;
    for (int r = 0; r < kRanks - 1; ++r) ranks.push_back(StartSave(ckpt, r, save));
    ASSERT_TRUE(WaitFor(
        [&] {
          for (auto& p : ranks) {
            if (!p->Ready() || !BlockedInCommit(p->pid())) return false;
          }
          auto info = InfoOf(ckpt);
          return info && info->arrived() == kRanks - 1;
        },
        absl::Seconds(60)));
    restart_meta();
    ranks.push_back(StartSave(ckpt, kRanks - 1, save));
    EXPECT_EQ(outcome(ranks, ckpt), "ok ");
  }
  // Killed as the last rank arrives (the commit may be under way).
  {
    const std::string ckpt = RunDir() + "/step_3";
    std::vector<std::unique_ptr<RankProcess>> ranks;
    for (int r = 0; r < kRanks; ++r) ranks.push_back(StartSave(ckpt, r, save));
    ASSERT_TRUE(WaitFor(
        [&] {
          for (auto& p : ranks) {
            if (p->Running() && !(p->Ready() && BlockedInCommit(p->pid()))) return false;
          }
          return true;
        },
        absl::Seconds(60)));
    restart_meta();
    outcome(ranks, ckpt);
  }
  // `latest` names a committed checkpoint.
  absl::StatusOr<std::string> latest = tools::ReadXattr(RunDir(), kLatestXattr);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(StateOf(RunDir() + "/" + *latest), "committed");

  ASSERT_TRUE(WriteWholeFile(stop_file, "stop").ok());
  RankResult watched = watcher->Wait();
  ASSERT_TRUE(watched.finished) << watched.log;
  EXPECT_NE(watched.log.find("violations=0 "), std::string::npos) << watched.log;
  EXPECT_EQ(watched.log.find("verified=0"), std::string::npos) << watched.log;
}

}  // namespace
}  // namespace ckptfs::testing
