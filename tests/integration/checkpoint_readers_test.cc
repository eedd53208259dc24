// Readers keep what they opened: a rank still loading a checkpoint reads
// every byte of a file it opened even when the checkpoint goes while it
// reads — removed by retention (user.ckptfs.keep) when a newer one commits,
// or by `ckptfs ckpt rm`. The chunks stay while the handle is open, within
// the metadata service's --orphan_grace_s, and go once the handle closes
// (or the grace ends), as an unlinked file's do.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/reserved_xattrs.h"
#include "gtest/gtest.h"
#include "tests/integration/checkpoint_support.h"
#include "tests/integration/posix_io.h"
#include "tools/mount_transactions.h"

namespace ckptfs::testing {
namespace {

// Long enough that a reclamation right after the close is told apart from
// one at the end of the grace.
constexpr int kOrphanGraceS = 12;
// The grace the test of the grace itself waits out: it only bounds the
// reclamation from below, so it needs no such margin.
constexpr int kWaitedOrphanGraceS = 6;

// Larger than what the mount fetches ahead of a reader (8 chunks of 1 MiB):
// after the first half, part of the second is fetched only after removal.
constexpr size_t kShardBytes = 32 << 20;

class CheckpointReadersTest : public CheckpointTest {
 protected:
  explicit CheckpointReadersTest(int orphan_grace_s = kOrphanGraceS) {
    extra_meta_flags_ = {absl::StrCat("--orphan_grace_s=", orphan_grace_s)};
  }

  // Commits step_1 — its shard (shard_), opened here, and another rank's
  // file that nobody opens — and opens the shard; the descriptor.
  int CommitAndOpenStep1() {
    shard_ = TestData(kShardBytes, 7);
    EXPECT_TRUE(
        CommitFiles(Step1(), {{"rank_0.pt", shard_}, {"rank_1.pt", TestData(3 << 20, 9)}}).ok())
        << Logs();
    ino_ = InoOf(Shard());
    unopened_ino_ = InoOf(Step1() + "/rank_1.pt");
    EXPECT_GT(ChunkFilesOf(cluster(), ino_), 0);
    EXPECT_GT(ChunkFilesOf(cluster(), unopened_ino_), 0);
    const int fd = ::open(Shard().c_str(), O_RDONLY);
    EXPECT_GE(fd, 0) << strerror(errno);
    return fd;
  }

  // Waits until the file of step_1 that nobody opened has lost its chunks:
  // the reclaimer has been through the removed checkpoint.
  bool WaitUnopenedReclaimed() {
    return WaitFor([&] { return ChunkFilesOf(cluster(), unopened_ino_) == 0; },
                   absl::Seconds(kOrphanGraceS / 2));
  }

  // Reads [from, to) of the shard through `fd` and compares it with what
  // was written; "" or what went wrong.
  std::string ReadAndCompare(int fd, size_t from, size_t to) {
    std::string got(to - from, '\0');
    size_t done = 0;
    while (done < got.size()) {
      const ssize_t n = ::pread(fd, got.data() + done, got.size() - done, from + done);
      if (n < 0) return absl::StrCat("pread at ", from + done, ": ", strerror(errno));
      if (n == 0) return absl::StrCat("end of file at ", from + done);
      done += static_cast<size_t>(n);
    }
    if (got != shard_.substr(from, to - from)) {
      return absl::StrCat("bytes [", from, ", ", to, ") differ from what was written");
    }
    return "";
  }

  // "" once `path` is gone (ENOENT), else what stat(2) says. Retention
  // runs right after the commit that triggers it is answered, so the
  // removal may land a moment after the commit returns: wait a little.
  static std::string Gone(const std::string& path) {
    WaitFor([&] { return StatGone(path).empty(); }, absl::Seconds(10));
    return StatGone(path);
  }
  static std::string StatGone(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) return path + " still exists";
    return errno == ENOENT ? "" : absl::StrCat("stat ", path, ": ", strerror(errno));
  }

  std::string Step1() const { return RunDir() + "/step_1"; }
  std::string Shard() const { return Step1() + "/rank_0.pt"; }

  std::string shard_;
  uint64_t ino_ = 0;
  uint64_t unopened_ino_ = 0;
};

TEST_F(CheckpointReadersTest, RetentionKeepsAnOpenShardReadableUntilItCloses) {
  ASSERT_TRUE(tools::WriteXattr(RunDir(), kKeepXattr, "1").ok());
  const int fd = CommitAndOpenStep1();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ReadAndCompare(fd, 0, kShardBytes / 2), "");

  ASSERT_TRUE(CommitFiles(RunDir() + "/step_2", {{"rank_0.pt", TestData(4096, 8)}}).ok()) << Logs();
  EXPECT_EQ(Gone(Step1()), "") << "retention (keep 1) did not remove step_1";
  EXPECT_EQ(LatestOf(RunDir()), "step_2");
  ASSERT_TRUE(WaitUnopenedReclaimed()) << "the unopened file of step_1 kept its chunks";
  EXPECT_EQ(ReadAndCompare(fd, kShardBytes / 2, kShardBytes), "")
      << "the open shard of step_1 lost its chunks to retention";
  EXPECT_GT(ChunkFilesOf(cluster(), ino_), 0) << "chunks gone while the handle is open";

  const absl::Time closed = absl::Now();
  ::close(fd);
  EXPECT_TRUE(
      WaitFor([&] { return ChunkFilesOf(cluster(), ino_) == 0; }, absl::Seconds(kOrphanGraceS / 2)))
      << "the chunks of step_1's shard were not reclaimed after its handle closed";
  EXPECT_LT(absl::Now() - closed, absl::Seconds(kOrphanGraceS / 2));
}

TEST_F(CheckpointReadersTest, CkptRmKeepsAnOpenShardReadableUntilItCloses) {
  const int fd = CommitAndOpenStep1();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ReadAndCompare(fd, 0, kShardBytes / 2), "");

  std::string out;
  ASSERT_EQ(Ckptfs("ckpt rm " + Step1(), &out), 0) << out;
  EXPECT_EQ(Gone(Step1()), "") << "ckpt rm did not remove step_1";
  ASSERT_TRUE(WaitUnopenedReclaimed()) << "the unopened file of step_1 kept its chunks";
  EXPECT_EQ(ReadAndCompare(fd, kShardBytes / 2, kShardBytes), "")
      << "the open shard of step_1 lost its chunks to ckpt rm";
  EXPECT_GT(ChunkFilesOf(cluster(), ino_), 0) << "chunks gone while the handle is open";

  ::close(fd);
  EXPECT_TRUE(
      WaitFor([&] { return ChunkFilesOf(cluster(), ino_) == 0; }, absl::Seconds(kOrphanGraceS / 2)))
      << "the chunks of step_1's shard were not reclaimed after its handle closed";
}

TEST_F(CheckpointReadersTest, AnUnopenedCheckpointIsReclaimedAtOnce) {
  ASSERT_TRUE(tools::WriteXattr(RunDir(), kKeepXattr, "1").ok());
  const int fd = CommitAndOpenStep1();
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_TRUE(CommitFiles(RunDir() + "/step_2", {{"rank_0.pt", TestData(4096, 8)}}).ok());
  EXPECT_EQ(Gone(Step1()), "");
  EXPECT_TRUE(
      WaitFor([&] { return ChunkFilesOf(cluster(), ino_) == 0; }, absl::Seconds(kOrphanGraceS / 2)))
      << "a removed checkpoint nobody reads waited for the orphan grace";
  EXPECT_TRUE(WaitUnopenedReclaimed());
}

class CheckpointOrphanGraceTest : public CheckpointReadersTest {
 protected:
  CheckpointOrphanGraceTest() : CheckpointReadersTest(kWaitedOrphanGraceS) {}
};

TEST_F(CheckpointOrphanGraceTest, TheOrphanGraceBoundsHowLongAHandleHoldsTheChunks) {
  ASSERT_TRUE(tools::WriteXattr(RunDir(), kKeepXattr, "1").ok());
  const int fd = CommitAndOpenStep1();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ReadAndCompare(fd, 0, 1 << 20), "");
  const absl::Time removed = absl::Now();
  ASSERT_TRUE(CommitFiles(RunDir() + "/step_2", {{"rank_0.pt", TestData(4096, 8)}}).ok());
  EXPECT_EQ(Gone(Step1()), "");

  // Held open past the grace: reclaimed then all the same.
  EXPECT_TRUE(WaitFor([&] { return ChunkFilesOf(cluster(), ino_) == 0; },
                      absl::Seconds(kWaitedOrphanGraceS + 30)))
      << "a handle held open kept the chunks past the orphan grace";
  EXPECT_GE(absl::Now() - removed, absl::Seconds(kWaitedOrphanGraceS - 1))
      << "reclaimed before the grace ended while a handle was open";
  ::close(fd);
}

}  // namespace
}  // namespace ckptfs::testing
