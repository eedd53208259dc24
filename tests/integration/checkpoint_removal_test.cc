// Deleting checkpoints the way training frameworks do — shutil.rmtree of
// the checkpoint directory (Hugging Face's save_total_limit, Lightning's
// save_top_k through fsspec, torchtitan's keep_latest_k) — through a real
// mount: a committed checkpoint goes, `latest` falls back to the newest
// other committed one, and the storage servers get the space back once the
// orphan grace has passed; an aborted checkpoint goes too. The first
// removal inside a committed checkpoint ends it ("removing"); nothing else
// in it changes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/integration/checkpoint_support.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

// The orphan grace of the test cluster: long enough for a held handle to
// read, short enough to wait for.
constexpr int kOrphanGraceS = 4;

class CheckpointRemovalTest : public CheckpointTest {
 protected:
  CheckpointRemovalTest() {
    extra_meta_flags_ = {absl::StrCat("--orphan_grace_s=", kOrphanGraceS)};
  }
};

// 0, or the errno of a failed call returning -1.
int Err(int rc) { return rc == 0 ? 0 : errno; }

int OpenErr(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

// The target of symlink `path`, or "" if it is none.
std::string ReadLink(const std::string& path) {
  char target[4096];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof(target));
  return n < 0 ? "" : std::string(target, static_cast<size_t>(n));
}

// Runs shutil.rmtree(path) in Python 3 without ignore_errors, as the
// frameworks do; its exit status, the traceback (if any) into `output`.
int Rmtree(const std::string& path, std::string* output) {
  return RunShell(absl::StrCat("/usr/bin/python3 -c 'import shutil, sys; "
                               "shutil.rmtree(sys.argv[1])' '",
                               path, "' 2>&1"),
                  output);
}

TEST_F(CheckpointRemovalTest, RmtreeOfACommittedCheckpointFreesItAndLatestFallsBack) {
  const std::string older = RunDir() + "/step_100";
  const std::string newer = RunDir() + "/step_200";
  const std::string old_data = TestData(1 << 20, 1);
  ASSERT_TRUE(CommitFiles(older, {{"model.pt", old_data}}).ok()) << Logs();
  const std::string model = TestData(3 << 20, 2);  // one 1 MiB chunk on each server
  const std::string shard = TestData(2 << 20, 3);
  ASSERT_TRUE(CommitFiles(newer, {{"model.pt", model}, {"shards/rank_0.pt", shard}}).ok());
  ASSERT_EQ(StateOf(newer), "committed");
  ASSERT_EQ(LatestOf(RunDir()), "step_200");
  ASSERT_EQ(ReadLink(RunDir() + "/latest"), "step_200");
  const std::vector<uint64_t> inos = {InoOf(newer + "/model.pt"),
                                      InoOf(newer + "/shards/rank_0.pt")};
  for (uint64_t ino : inos) ASSERT_GT(ChunkFilesOf(cluster(), ino), 0) << ino;
  const uint64_t disk_full = StorageDiskBytes(cluster());
  // A reader that has the file open keeps reading it within the grace.
  const int reader = ::open((newer + "/model.pt").c_str(), O_RDONLY);
  ASSERT_GE(reader, 0) << strerror(errno);

  std::string out;
  ASSERT_EQ(Rmtree(newer, &out), 0) << out;
  struct stat st {};
  EXPECT_EQ(Err(::stat(newer.c_str(), &st)), ENOENT);
  EXPECT_EQ(LatestOf(RunDir()), "step_100");
  EXPECT_EQ(ReadLink(RunDir() + "/latest"), "step_100");
  EXPECT_EQ(ListNames(RunDir()), (std::vector<std::string>{"latest", "step_100"}));
  EXPECT_EQ(StateOf(older), "committed");
  auto old_read = ReadWholeFile(older + "/model.pt");
  ASSERT_TRUE(old_read.ok()) << old_read.status();
  EXPECT_TRUE(*old_read == old_data);
  std::string held(model.size(), '\0');
  EXPECT_EQ(::pread(reader, held.data(), held.size(), 0), static_cast<ssize_t>(model.size()))
      << strerror(errno);
  EXPECT_TRUE(held == model) << "the held handle read other bytes after rmtree";
  ::close(reader);

  // After the orphan grace the reclaimer trims the chunks.
  for (uint64_t ino : inos) {
    EXPECT_TRUE(WaitFor([&] { return ChunkFilesOf(cluster(), ino) == 0; },
                        absl::Seconds(kOrphanGraceS + 30)))
        << "chunks of inode " << ino << " were not reclaimed";
  }
  const uint64_t disk_after = StorageDiskBytes(cluster());
  EXPECT_LE(disk_after + model.size() + shard.size(), disk_full + (1u << 20))
      << "storage disk usage " << disk_full << " -> " << disk_after;
}

TEST_F(CheckpointRemovalTest, RmtreeOfAnAbortedCheckpointRemovesIt) {
  ASSERT_TRUE(CommitFiles(RunDir() + "/step_1", {{"model.pt", TestData(4096, 1)}}).ok());
  // Aborted: a file still open for writing at the commit (EBUSY).
  const std::string aborted = RunDir() + "/step_2";
  ASSERT_EQ(::mkdir(aborted.c_str(), 0755), 0);
  ASSERT_TRUE(tools::WriteXattr(aborted, kRanksXattr, "1").ok());
  const int writer = ::open((aborted + "/model.pt").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(writer, 0) << strerror(errno);
  const std::string data = TestData(65536, 2);
  ASSERT_EQ(::write(writer, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  EXPECT_EQ(ErrnoFromStatus(tools::CommitRank(aborted, 0)), EBUSY);
  ::close(writer);
  ASSERT_EQ(StateOf(aborted), "aborted");

  std::string out;
  ASSERT_EQ(Rmtree(aborted, &out), 0) << out;
  struct stat st {};
  EXPECT_EQ(Err(::stat(aborted.c_str(), &st)), ENOENT);
  EXPECT_EQ(LatestOf(RunDir()), "step_1");
  out.clear();
  ASSERT_EQ(Ckptfs("ckpt ls --all " + RunDir(), &out), 0) << out;
  EXPECT_EQ(out.find("step_2"), std::string::npos) << out;
}

TEST_F(CheckpointRemovalTest, AnUnlinkEndsTheCheckpointAndNothingElseChangesInIt) {
  const std::string older = RunDir() + "/c1";
  const std::string ckpt = RunDir() + "/c2";
  ASSERT_TRUE(CommitFiles(older, {{"a.bin", TestData(4096, 1)}}).ok());
  const std::string b = TestData(100000, 3);
  ASSERT_TRUE(CommitFiles(ckpt, {{"a.bin", TestData(4096, 2)}, {"b.bin", b}}).ok());
  ASSERT_EQ(LatestOf(RunDir()), "c2");

  ASSERT_EQ(Err(::unlink((ckpt + "/a.bin").c_str())), 0) << strerror(errno);
  EXPECT_EQ(StateOf(ckpt), "removing");
  EXPECT_EQ(LatestOf(RunDir()), "c1");
  EXPECT_EQ(ListNames(RunDir()), (std::vector<std::string>{"c1", "latest"}));
  // Only names go: creating, writing, truncating, renaming, chmod and
  // setxattr stay EROFS.
  const std::string file = ckpt + "/b.bin";
  EXPECT_EQ(OpenErr(ckpt + "/new.bin", O_WRONLY | O_CREAT), EROFS);
  EXPECT_EQ(OpenErr(file, O_WRONLY), EROFS);
  EXPECT_EQ(Err(::truncate(file.c_str(), 10)), EROFS);
  EXPECT_EQ(Err(::rename(file.c_str(), (ckpt + "/moved.bin").c_str())), EROFS);
  EXPECT_EQ(Err(::chmod(file.c_str(), 0600)), EROFS);
  EXPECT_EQ(Err(::mkdir((ckpt + "/dir").c_str(), 0755)), EROFS);
  EXPECT_EQ(SetXattrErrno(file, "user.note", "x"), EROFS);
  EXPECT_EQ(Err(::rename(ckpt.c_str(), (RunDir() + "/renamed").c_str())), EROFS);
  EXPECT_EQ(Err(::rmdir(ckpt.c_str())), ENOTEMPTY);
  auto read = ReadWholeFile(file);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == b);
  // Never committed again: a retried commit says it is gone.
  EXPECT_EQ(ErrnoFromStatus(tools::CommitRank(ckpt, 0)), ENOENT);
  auto info = InfoOf(ckpt);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state(), meta::REMOVING);
  EXPECT_GT(info->removing_ms(), 0);

  std::string out;
  ASSERT_EQ(Ckptfs("ckpt ls " + RunDir(), &out), 0) << out;
  EXPECT_EQ(out.find("c2"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Ckptfs("ckpt ls --all " + RunDir(), &out), 0) << out;
  const size_t row = out.find("\nc2 ");
  ASSERT_NE(row, std::string::npos) << out;
  EXPECT_NE(out.substr(row, out.find('\n', row + 1) - row).find("removing"), std::string::npos)
      << out;
  out.clear();
  ASSERT_EQ(Ckptfs("ckpt state " + ckpt, &out), 0) << out;
  EXPECT_EQ(out.substr(0, 9), "removing\n") << out;

  // A pending checkpoint's directory is not rmdir'ed.
  const std::string pending = RunDir() + "/c3";
  ASSERT_EQ(::mkdir(pending.c_str(), 0755), 0);
  ASSERT_TRUE(tools::WriteXattr(pending, kRanksXattr, "2").ok());
  EXPECT_EQ(Err(::rmdir(pending.c_str())), EBUSY);

  // `ckptfs ckpt gc` leaves it to whoever removes it for --grace-s, then
  // finishes it.
  out.clear();
  ASSERT_EQ(Ckptfs("ckpt gc " + RunDir(), &out), 0) << out;
  EXPECT_NE(out.find("whose removal began less than 60s ago"), std::string::npos) << out;
  EXPECT_EQ(StateOf(ckpt), "removing");
  out.clear();
  ASSERT_EQ(Ckptfs("ckpt gc --grace-s 0 " + RunDir(), &out), 0) << out;
  EXPECT_NE(out.find("partly removed"), std::string::npos) << out;
  struct stat st {};
  EXPECT_EQ(Err(::stat(ckpt.c_str(), &st)), ENOENT);
  EXPECT_EQ(StateOf(pending), "pending");
  EXPECT_EQ(ListNames(RunDir()), (std::vector<std::string>{"c1", "latest"}));
  EXPECT_EQ(LatestOf(RunDir()), "c1");
}

}  // namespace
}  // namespace ckptfs::testing
