// Checkpoint transactions through a real kernel mount (fixture:
// mount_fixture.h, over the metadata service in-process): the xattrs and their errnos,
// a commit that blocks until every rank arrived while hundreds of ranks
// wait at once (getxattr user.ckptfs.commit.R: a setxattr holds the
// directory's inode lock) without starving other requests, close(2) releasing the
// writer before it returns, a dup'd descriptor writing after a close, a
// signal interrupting a waiting commit (EINTR, and the retry waits for the
// same outcome), and EROFS inside a committed checkpoint, where only names
// may be removed.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/fuse/mount_fixture.h"

namespace ckptfs::fuse {
namespace {

class CheckpointMountTest : public MountTest {
 protected:
  // setxattr's errno, 0 on success.
  int Set(const std::string& name, const char* attr, const std::string& value) {
    return setxattr(P(name).c_str(), attr, value.data(), value.size(), 0) == 0 ? 0 : errno;
  }
  // getxattr's value, or "<errno N>".
  std::string Get(const std::string& name, const char* attr) {
    char buf[8192];
    const ssize_t n = getxattr(P(name).c_str(), attr, buf, sizeof(buf));
    if (n < 0) return absl::StrCat("<errno ", errno, ">");
    return std::string(buf, n);
  }
  static std::string Errno(int err) { return absl::StrCat("<errno ", err, ">"); }

  ino_t InodeOf(const std::string& name) {
    struct stat st;
    return stat(P(name).c_str(), &st) == 0 ? st.st_ino : 0;
  }

  // The ranks of checkpoint `ckpt` whose commit the service has recorded
  // (ranks waiting for its outcome).
  uint32_t Arrived(uint64_t ckpt) {
    auto info = service_->Checkpoint(ckpt);
    return info.ok() ? info->arrived() : 0;
  }

  // Waits until the service has recorded the commits of `n` ranks of
  // checkpoint `ckpt`; false if that does not happen within `limit` (the
  // mount ran out of workers).
  bool WaitForArrivals(uint64_t ckpt, uint32_t n, absl::Duration limit) {
    const absl::Time give_up = absl::Now() + limit;
    while (Arrived(ckpt) < n) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }
};

TEST_F(CheckpointMountTest, MountAllowsHundredsOfWorkers) {
  EXPECT_GE(MaxWorkerThreads(MountOptions{}), 256u);
}

TEST_F(CheckpointMountTest, BadValuesAreEinvalAndChangeNothing) {
  ASSERT_EQ(mkdir(P("step").c_str(), 0755), 0);
  for (const char* bad : {"0", "-1", "abc", "8x", ""}) {
    EXPECT_EQ(Set("step", "user.ckptfs.ranks", bad), EINVAL) << bad;
  }
  EXPECT_EQ(Get("step", "user.ckptfs.state"), Errno(ENODATA));
  EXPECT_EQ(Set("step", "user.ckptfs.commit", "0"), EINVAL);  // not declared
  ASSERT_EQ(Set("step", "user.ckptfs.ranks", "2\n"), 0);
  EXPECT_EQ(Set("step", "user.ckptfs.ranks", "2"), 0);
  EXPECT_EQ(Set("step", "user.ckptfs.ranks", "3"), EINVAL);
  EXPECT_EQ(Set("step", "user.ckptfs.commit", "2"), EINVAL);
  EXPECT_EQ(Set("step", "user.ckptfs.commit", "x"), EINVAL);
  EXPECT_EQ(Get("step", "user.ckptfs.state"), "pending");
  EXPECT_EQ(Get("step", "user.ckptfs.ranks"), "2");
}

TEST_F(CheckpointMountTest, CommitAfterCloseCommitsAndListsTheCheckpoint) {
  ASSERT_EQ(mkdir(P("run").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(P("run/step-1").c_str(), 0755), 0);
  ASSERT_EQ(Set("run/step-1", "user.ckptfs.ranks", "1"), 0);
  // close(2) returns only once the writer is released: a commit right after
  // it never finds the file open.
  ASSERT_EQ(WriteFile("run/step-1/model.pt", std::string(100000, 'm')), 0);
  ASSERT_EQ(Set("run/step-1", "user.ckptfs.commit", "0"), 0);
  EXPECT_EQ(Get("run/step-1", "user.ckptfs.state"), "committed");
  EXPECT_EQ(Get("run", "user.ckptfs.latest"), "step-1");
  const std::string info = Get("run/step-1", "user.ckptfs.info");
  EXPECT_EQ(info.rfind("name=step-1 state=committed ranks=1 arrived=1 files=1 bytes=100000 ", 0),
            0u)
      << info;
  const std::string list = Get("run", "user.ckptfs.checkpoints");
  EXPECT_EQ(list, info + "\n");
  char target[64];
  const ssize_t n = readlink(P("run/latest").c_str(), target, sizeof(target));
  EXPECT_EQ(std::string(target, n > 0 ? n : 0), "step-1");

  // Committed: read-only.
  EXPECT_EQ(open(P("run/step-1/new").c_str(), O_WRONLY | O_CREAT, 0644), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(open(P("run/step-1/model.pt").c_str(), O_WRONLY), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(truncate(P("run/step-1/model.pt").c_str(), 0), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(ReadFile("run/step-1/model.pt"), std::string(100000, 'm'));
  // But names may be removed (frameworks delete their old checkpoints
  // themselves): the first one ends the checkpoint, `latest` leaves it.
  ASSERT_EQ(unlink(P("run/step-1/model.pt").c_str()), 0) << strerror(errno);
  EXPECT_EQ(Get("run/step-1", "user.ckptfs.state"), "removing");
  EXPECT_EQ(Get("run", "user.ckptfs.latest"), Errno(ENODATA));
  EXPECT_EQ(open(P("run/step-1/model.pt").c_str(), O_WRONLY | O_CREAT, 0644), -1);
  EXPECT_EQ(errno, EROFS);

  // Removal of the whole checkpoint goes through the run directory.
  ASSERT_EQ(Set("run", "user.ckptfs.remove", "step-1"), 0);
  struct stat st;
  EXPECT_EQ(stat(P("run/step-1").c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(Get("run", "user.ckptfs.latest"), Errno(ENODATA));
}

TEST_F(CheckpointMountTest, OpenFileAbortsTheCommitWithEbusy) {
  ASSERT_EQ(mkdir(P("step").c_str(), 0755), 0);
  ASSERT_EQ(Set("step", "user.ckptfs.ranks", "1"), 0);
  const int fd = open(P("step/open").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "abc", 3), 3);
  EXPECT_EQ(Set("step", "user.ckptfs.commit", "0"), EBUSY);
  EXPECT_EQ(Get("step", "user.ckptfs.state"), "aborted");
  close(fd);  // its file is gone with the aborted checkpoint
  struct stat st;
  EXPECT_EQ(stat(P("step/open").c_str(), &st), -1);
  EXPECT_EQ(stat(P("step").c_str(), &st), 0);  // reachable by name, empty
}

TEST_F(CheckpointMountTest, DupedDescriptorWritingAfterCloseRegistersAgain) {
  ASSERT_EQ(mkdir(P("step").c_str(), 0755), 0);
  const int fd = open(P("step/f").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  const ino_t ino = InodeOf("step/f");
  ASSERT_EQ(service_->WriterHandles(ino).size(), 1u);
  const int dup_fd = dup(fd);
  ASSERT_GE(dup_fd, 0);
  ASSERT_EQ(write(fd, "ab", 2), 2);
  ASSERT_EQ(close(fd), 0);  // FUSE_FLUSH: released, though dup_fd stays open
  EXPECT_TRUE(service_->WriterHandles(ino).empty());
  ASSERT_EQ(write(dup_fd, "cd", 2), 2);
  EXPECT_EQ(service_->WriterHandles(ino).size(), 1u);
  ASSERT_EQ(Set("step", "user.ckptfs.ranks", "1"), 0);
  EXPECT_EQ(Set("step", "user.ckptfs.commit", "0"), EBUSY);  // dup_fd still writes
  close(dup_fd);
}

TEST_F(CheckpointMountTest, HundredsOfRanksWaitWithoutStarvingTheMount) {
  constexpr int kRanks = 300;  // more than libfuse's default cap, and than 256
  ASSERT_EQ(mkdir(P("step").c_str(), 0755), 0);
  // A mount short of workers fails the test (the barrier times out)
  // instead of hanging it.
  ASSERT_EQ(Set("step", "user.ckptfs.commit_timeout_s", "120"), 0);
  ASSERT_EQ(Set("step", "user.ckptfs.ranks", absl::StrCat(kRanks)), 0);
  const uint64_t step = InodeOf("step");
  std::vector<std::thread> ranks;
  std::vector<std::string> results(kRanks);
  for (int rank = 0; rank < kRanks - 1; ++rank) {
    ranks.emplace_back([&, rank] {
      const std::string file = absl::StrCat("step/rank", rank);
      const int written = WriteFile(file, absl::StrCat("data of rank ", rank));
      results[rank] = written != 0 ? Errno(written)
                                   : Get("step", absl::StrCat("user.ckptfs.commit.", rank).c_str());
    });
  }
  const bool all_waiting = WaitForArrivals(step, kRanks - 1, absl::Seconds(100));
  EXPECT_TRUE(all_waiting) << Arrived(step) << " of " << kRanks - 1 << " ranks got to wait";
  // The mount still serves everything else while they wait.
  EXPECT_EQ(WriteFile("elsewhere", "still served"), 0);
  EXPECT_EQ(ReadFile("elsewhere"), "still served");
  EXPECT_EQ(Get("step", "user.ckptfs.state"), "pending");
  // The last rank commits with setxattr: that form works for one waiter.
  EXPECT_EQ(WriteFile(absl::StrCat("step/rank", kRanks - 1), "last"), 0);
  const int last = Set("step", "user.ckptfs.commit", absl::StrCat(kRanks - 1));
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(last, 0);
  for (int rank = 0; rank < kRanks - 1; ++rank) {
    EXPECT_EQ(results[rank], "committed") << "rank " << rank;
  }
  EXPECT_EQ(Get("step", "user.ckptfs.state"), "committed");
}

TEST_F(CheckpointMountTest, CommitByGetxattrNamesTheRank) {
  ASSERT_EQ(mkdir(P("step").c_str(), 0755), 0);
  ASSERT_EQ(Set("step", "user.ckptfs.ranks", "1"), 0);
  EXPECT_EQ(Get("step", "user.ckptfs.commit.x"), Errno(EINVAL));
  EXPECT_EQ(Get("step", "user.ckptfs.commit.1"), Errno(EINVAL));  // rank >= N
  EXPECT_EQ(Get("step", "user.ckptfs.state"), "pending");
  // A size query commits too (idempotent), then the read gets the value.
  EXPECT_EQ(getxattr(P("step").c_str(), "user.ckptfs.commit.0", nullptr, 0), 9);
  EXPECT_EQ(Get("step", "user.ckptfs.commit.0"), "committed");
  EXPECT_EQ(Set("step", "user.ckptfs.commit.0", "0"), EINVAL);
}

void NoOpHandler(int) {}

TEST_F(CheckpointMountTest, SignalInterruptsAWaitingCommitAndTheRetryWaits) {
  struct sigaction action {};
  action.sa_handler = NoOpHandler;  // no SA_RESTART
  sigemptyset(&action.sa_mask);
  struct sigaction previous {};
  ASSERT_EQ(sigaction(SIGUSR1, &action, &previous), 0);

  ASSERT_EQ(mkdir(P("step").c_str(), 0755), 0);
  ASSERT_EQ(Set("step", "user.ckptfs.ranks", "2"), 0);
  const uint64_t step = InodeOf("step");
  std::atomic<int> first{-1};
  std::atomic<int> retried{-1};
  std::thread waiter([&] {
    first = Set("step", "user.ckptfs.commit", "0");
    retried = Set("step", "user.ckptfs.commit", "0");
  });
  int commits = 0;
  if (WaitForArrivals(step, 1, absl::Seconds(60))) {
    // The waiter's request is in the daemon now: the signal makes the
    // kernel send FUSE_INTERRUPT for it.
    commits = meta_->Calls("CommitCheckpoint");
    pthread_kill(waiter.native_handle(), SIGUSR1);
    while (first.load() == -1) absl::SleepFor(absl::Milliseconds(2));
  }
  // The retry reaches the service and waits in the same barrier; rank 1
  // ends it (through getxattr: the waiter's setxattr holds the directory's
  // inode lock).
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (meta_->Calls("CommitCheckpoint") == commits && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_GT(meta_->Calls("CommitCheckpoint"), commits);
  EXPECT_EQ(Get("step", "user.ckptfs.commit.1"), "committed");
  waiter.join();
  sigaction(SIGUSR1, &previous, nullptr);
  EXPECT_EQ(first.load(), EINTR);
  EXPECT_EQ(retried.load(), 0);
  EXPECT_EQ(Get("step", "user.ckptfs.state"), "committed");
}

}  // namespace
}  // namespace ckptfs::fuse
