// Checkpoint transactions seen from the namespace: bad requests change nothing
// and say why, a committed checkpoint is immutable but for removal, listings
// show committed checkpoints only, DCP's save sequence commits, and retention
// returns the space of older checkpoints to the storage servers.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/checkpoint_support.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

using CheckpointNamespaceTest = CheckpointTest;

// 0, or the errno of a failed call returning -1.
int Err(int rc) { return rc == 0 ? 0 : errno; }

int OpenErr(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

uint64_t FreeBytes(const std::string& path) {
  struct statvfs vfs {};
  if (::statvfs(path.c_str(), &vfs) != 0) return 0;
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

// Malformed declares and commits are EINVAL and change nothing; a
// committed checkpoint refuses every change but removal with EROFS.
TEST_F(CheckpointNamespaceTest, BadRequestsChangeNothingAndSayWhy) {
  const std::string ckpt = RunDir() + "/step_1";
  ASSERT_EQ(::mkdir(ckpt.c_str(), 0755), 0);
  // Commit of an undeclared directory.
  EXPECT_EQ(SetXattrErrno(ckpt, kCommitXattr, "0"), EINVAL);
  EXPECT_EQ(GetXattrErrno(ckpt, "user.ckptfs.commit.0"), EINVAL);
  // N = 0 or not a number.
  for (const char* bad : {"0", "", "abc", "-1", "8x", "nan", " 2", "1048577"}) {
    EXPECT_EQ(SetXattrErrno(ckpt, kRanksXattr, bad), EINVAL) << "N = \"" << bad << "\"";
  }
  EXPECT_EQ(StateOf(ckpt), "");  // still no checkpoint
  // The root and a directory inside a checkpoint cannot be declared.
  EXPECT_EQ(SetXattrErrno(mnt(), kRanksXattr, "2"), EINVAL);

  ASSERT_EQ(SetXattrErrno(ckpt, kRanksXattr, "2\n"), 0);  // what `echo` writes
  EXPECT_EQ(StateOf(ckpt), "pending");
  EXPECT_EQ(SetXattrErrno(ckpt, kRanksXattr, "2"), 0);  // the same N: harmless
  EXPECT_EQ(SetXattrErrno(ckpt, kRanksXattr, "3"), EINVAL);
  ASSERT_EQ(::mkdir((ckpt + "/sub").c_str(), 0755), 0);
  EXPECT_EQ(SetXattrErrno(ckpt + "/sub", kRanksXattr, "1"), EINVAL);
  ASSERT_EQ(::rmdir((ckpt + "/sub").c_str()), 0);
  std::string out;
  EXPECT_EQ(Ckptfs(absl::StrCat("ckpt declare ", ckpt, " 3"), &out), 1) << out;
  EXPECT_NE(out.find("Invalid argument (EINVAL)"), std::string::npos) << out;
  EXPECT_NE(out.find("declared for 2 ranks"), std::string::npos) << out;
  // Rank >= N, < 0, not a number: refused before the barrier starts.
  for (const char* bad : {"2", "-1", "nan", "abc", "", "1x"}) {
    EXPECT_EQ(SetXattrErrno(ckpt, kCommitXattr, bad), EINVAL) << "rank \"" << bad << "\"";
    EXPECT_EQ(GetXattrErrno(ckpt, absl::StrCat(kCommitRankXattrPrefix, bad)), EINVAL)
        << "rank \"" << bad << "\"";
  }
  std::string call = CallModule({"commit", ckpt, "7"});
  EXPECT_NE(call.find("CALL error errno=EINVAL"), std::string::npos) << call;
  EXPECT_NE(call.find("commit of rank 7"), std::string::npos) << call;
  call = CallModule({"declare", ckpt, "abc"});
  EXPECT_NE(call.find("CALL error errno=EINVAL"), std::string::npos) << call;
  auto info = InfoOf(ckpt);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state(), meta::PENDING);
  EXPECT_EQ(info->ranks(), 2u);
  EXPECT_EQ(info->arrived(), 0u);
  EXPECT_EQ(info->first_commit_ms(), 0);  // no timer was started

  // Commit it properly, then try to change it.
  auto r0 = StartSave(ckpt, 0, {"--bytes", "100000"});
  auto r1 = StartSave(ckpt, 1, {"--bytes", "100000"});
  EXPECT_EQ(r0->Wait().result, "ok") << r0->Log();
  EXPECT_EQ(r1->Wait().result, "ok") << r1->Log();
  ASSERT_EQ(StateOf(ckpt), "committed");
  const std::string file = ckpt + "/rank0_0.bin";
  EXPECT_EQ(OpenErr(file, O_WRONLY), EROFS);
  EXPECT_EQ(OpenErr(file, O_RDWR | O_TRUNC), EROFS);
  EXPECT_EQ(OpenErr(ckpt + "/new.bin", O_WRONLY | O_CREAT), EROFS);
  EXPECT_EQ(Err(::truncate(file.c_str(), 10)), EROFS);
  EXPECT_EQ(Err(::chmod(file.c_str(), 0600)), EROFS);
  EXPECT_EQ(Err(::rename(file.c_str(), (ckpt + "/moved.bin").c_str())), EROFS);
  EXPECT_EQ(Err(::rename(file.c_str(), (RunDir() + "/moved.bin").c_str())), EROFS);
  EXPECT_EQ(Err(::mkdir((ckpt + "/dir").c_str(), 0755)), EROFS);
  EXPECT_EQ(Err(::symlink("x", (ckpt + "/link").c_str())), EROFS);
  EXPECT_EQ(Err(::rename(ckpt.c_str(), (RunDir() + "/renamed").c_str())), EROFS);
  EXPECT_EQ(Err(::rmdir(ckpt.c_str())), ENOTEMPTY);  // (removing names is allowed:
                                                     // checkpoint_removal_test.cc)
  EXPECT_EQ(SetXattrErrno(ckpt, "user.note", "x"), EROFS);
  EXPECT_EQ(SetXattrErrno(file, "user.note", "x"), EROFS);
  EXPECT_EQ(SetXattrErrno(ckpt, kRanksXattr, "2"), 0);  // same N: no change
  EXPECT_EQ(StateOf(ckpt), "committed");
  EXPECT_EQ(ListNames(ckpt), (std::vector<std::string>{"rank0_0.bin", "rank1_0.bin"}));
  EXPECT_EQ(Verify(ckpt, {"--ranks", "2", "--bytes", "100000"}), "VERIFY ok\n");
}

// A listing shows committed checkpoints only; pending and aborted
// ones are reachable by name; their state reads as such; `ckptfs ckpt ls`
// and the Python module show them with --all / all=True.
TEST_F(CheckpointNamespaceTest, ListingShowsCommittedOnlyOthersReachableByName) {
  const std::string committed = RunDir() + "/c1";
  const std::string pending = RunDir() + "/p1";
  const std::string aborted = RunDir() + "/a1";
  ASSERT_TRUE(SaveCheckpoint(committed, 1, {"--bytes", "1048576"}));
  std::string out;
  ASSERT_EQ(Ckptfs(absl::StrCat("ckpt declare ", pending, " 2 --timeout-s 600"), &out), 0) << out;
  auto a = StartSave(aborted, 0, {"--declare", "1", "--hold-open"});
  RankResult ar = a->Wait();
  ASSERT_EQ(ar.errname, "EBUSY") << ar.log;

  EXPECT_EQ(ListNames(RunDir()), (std::vector<std::string>{"c1", "latest"}));
  struct stat st {};
  EXPECT_EQ(::stat(pending.c_str(), &st), 0);
  EXPECT_EQ(::stat(aborted.c_str(), &st), 0);
  EXPECT_EQ(StateOf(committed), "committed");
  EXPECT_EQ(StateOf(pending), "pending");
  EXPECT_EQ(StateOf(aborted), "aborted");
  EXPECT_EQ(StateOf(RunDir()), "");

  out.clear();
  ASSERT_EQ(Ckptfs("ckpt ls " + RunDir(), &out), 0) << out;
  EXPECT_NE(out.find("c1 "), std::string::npos) << out;
  EXPECT_EQ(out.find("p1 "), std::string::npos) << out;
  EXPECT_EQ(out.find("a1 "), std::string::npos) << out;
  EXPECT_NE(out.find("latest"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Ckptfs("ckpt ls --all " + RunDir(), &out), 0) << out;
  // One row each: name, state, ranks arrived/N, size, age.
  auto row = [&](const std::string& name) {
    const size_t at = out.find("\n" + name + " ");
    return at == std::string::npos ? "" : out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(row("c1").find("committed"), std::string::npos) << out;
  EXPECT_NE(row("c1").find("1/1"), std::string::npos) << out;
  EXPECT_NE(row("c1").find("1.0 MiB"), std::string::npos) << out;
  EXPECT_NE(row("p1").find("pending"), std::string::npos) << out;
  EXPECT_NE(row("p1").find("0/2"), std::string::npos) << out;
  EXPECT_NE(row("a1").find("aborted"), std::string::npos) << out;
  EXPECT_NE(row("a1").find("1/1"), std::string::npos) << out;
  EXPECT_NE(row("a1").find("EBUSY"), std::string::npos) << out;
  EXPECT_NE(out.find("AGE"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Ckptfs("ckpt state " + pending, &out), 0) << out;
  EXPECT_EQ(out.substr(0, 8), "pending\n") << out;

  std::string call = CallModule({"checkpoints", RunDir()});
  EXPECT_NE(call.find("CALL ok [{\"name\": \"c1\", \"state\": \"committed\""), std::string::npos)
      << call;
  EXPECT_EQ(call.find("\"p1\""), std::string::npos) << call;
  call = CallModule({"checkpoints", RunDir(), "all"});
  EXPECT_NE(call.find("\"name\": \"p1\", \"state\": \"pending\""), std::string::npos) << call;
  EXPECT_NE(call.find("\"name\": \"a1\", \"state\": \"aborted\""), std::string::npos) << call;
  call = CallModule({"latest", RunDir()});
  EXPECT_EQ(call, absl::StrCat("CALL ok \"", committed, "\"\n"));
  call = CallModule({"state", aborted});
  EXPECT_EQ(call, "CALL ok \"aborted\"\n");
}

// DCP's save sequence inside a checkpoint — per-rank
// __{rank}_0.distcp written and fsynced, then on the coordinator
// .metadata.tmp fsynced, the old .metadata unlinked, the rename — replayed
// from Python (Debian's torch cannot import its DCP module); it commits.
TEST_F(CheckpointNamespaceTest, DcpSaveSequenceCommits) {
  constexpr int kRanks = 3;
  const std::string ckpt = RunDir() + "/step_500";
  std::vector<std::unique_ptr<RankProcess>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(
        StartSave(ckpt, r, {"--declare", "3", "--dcp", "--ranks", "3", "--bytes", "2500000"}));
  }
  for (auto& p : ranks) {
    RankResult r = p->Wait();
    EXPECT_EQ(r.result, "ok") << r.log;
    EXPECT_EQ(r.state, "committed") << r.log;
  }
  EXPECT_EQ(ListNames(ckpt), (std::vector<std::string>{".metadata", "__0_0.distcp", "__1_0.distcp",
                                                       "__2_0.distcp"}));
  EXPECT_EQ(Verify(ckpt, {"--ranks", "3", "--bytes", "2500000", "--dcp"}), "VERIFY ok\n");
  // The .metadata is the new one.
  std::string out;
  ASSERT_EQ(RunShell(absl::StrCat("/usr/bin/python3 -c 'import pickle,sys; "
                                  "print(pickle.load(open(sys.argv[1], \"rb\"))[\"version\"])' ",
                                  ckpt, "/.metadata"),
                     &out),
            0)
      << out;
  EXPECT_EQ(out, "new\n");
  EXPECT_EQ(LatestOf(RunDir()), "step_500");
}

// The storage servers on a disk of their own, so that statfs of the mount
// moves only with what this cluster stores, whatever else the host writes.
class CheckpointRetentionTest : public CheckpointTest {
 protected:
  CheckpointRetentionTest() { storage_disk_mib_ = 256; }
};

// A run directory keeping K = 2 committed checkpoints removes the older
// ones (and aborted ones) on each commit; the storage servers' chunk files
// go, and statfs of the mount shows the space returned.
TEST_F(CheckpointRetentionTest, RetentionReclaimsOlderCheckpoints) {
  std::string out;
  ASSERT_EQ(Ckptfs(absl::StrCat("ckpt keep ", RunDir(), " 2"), &out), 0) << out;
  EXPECT_EQ(SetXattrErrno(RunDir(), kKeepXattr, "0"), EINVAL);
  const uint64_t free_before = FreeBytes(mnt());
  constexpr uint64_t kBig = 64ull << 20;  // step_1: 2 ranks x 2 files x 16 MiB
  ASSERT_TRUE(SaveCheckpoint(RunDir() + "/step_1", 2, {"--files", "2", "--bytes", "16777216"}));
  std::vector<uint64_t> inos;
  for (const std::string& name : ListNames(RunDir() + "/step_1")) {
    inos.push_back(InoOf(RunDir() + "/step_1/" + name));
    EXPECT_GT(ChunkFilesOf(cluster(), inos.back()), 0);
  }
  ASSERT_EQ(inos.size(), 4u);
  // Every server reports the disk they share (its own tmpfs), so statfs of
  // the mount counts the 64 MiB once per server, once their heartbeats
  // have reported it.
  const uint64_t servers = cluster().storage_servers();
  ASSERT_TRUE(
      WaitFor([&] { return FreeBytes(mnt()) + servers * kBig <= free_before; }, absl::Seconds(30)))
      << "statfs free " << free_before << " -> " << FreeBytes(mnt());
  const uint64_t free_full = FreeBytes(mnt());
  const uint64_t disk_full = StorageDiskBytes(cluster());

  auto aborted = StartSave(RunDir() + "/bad", 0, {"--declare", "1", "--hold-open"});
  EXPECT_EQ(aborted->Wait().errname, "EBUSY") << aborted->Log();
  ASSERT_TRUE(SaveCheckpoint(RunDir() + "/step_2", 1, {"--bytes", "65536"}));
  // Two committed: both kept; the aborted one is removed.
  struct stat st {};
  EXPECT_EQ(Err(::stat((RunDir() + "/bad").c_str(), &st)), ENOENT);
  EXPECT_EQ(StateOf(RunDir() + "/step_1"), "committed");
  ASSERT_TRUE(SaveCheckpoint(RunDir() + "/step_3", 1, {"--bytes", "65536"}));
  EXPECT_EQ(Err(::stat((RunDir() + "/step_1").c_str(), &st)), ENOENT);
  EXPECT_EQ(ListNames(RunDir()), (std::vector<std::string>{"latest", "step_2", "step_3"}));
  EXPECT_EQ(LatestOf(RunDir()), "step_3");

  for (uint64_t ino : inos) {
    EXPECT_TRUE(WaitFor([&] { return ChunkFilesOf(cluster(), ino) == 0; }, absl::Seconds(30)))
        << "chunks of inode " << ino << " were not reclaimed";
  }
  const uint64_t disk_after = StorageDiskBytes(cluster());
  EXPECT_LE(disk_after + kBig, disk_full + (1u << 20))
      << "storage disk usage " << disk_full << " -> " << disk_after;
  // statfs: the 64 MiB come back once per server, less step_2's and
  // step_3's few blocks.
  constexpr uint64_t kNewFiles = 1u << 20;
  EXPECT_TRUE(WaitFor([&] { return FreeBytes(mnt()) >= free_full + servers * (kBig - kNewFiles); },
                      absl::Seconds(30)))
      << "statfs free " << free_full << " -> " << FreeBytes(mnt());

  // `ckptfs ckpt rm` removes a committed one; `latest` stays on step_3.
  out.clear();
  ASSERT_EQ(Ckptfs("ckpt rm " + RunDir() + "/step_2", &out), 0) << out;
  EXPECT_EQ(ListNames(RunDir()), (std::vector<std::string>{"latest", "step_3"}));
  EXPECT_EQ(LatestOf(RunDir()), "step_3");
}

}  // namespace
}  // namespace ckptfs::testing
