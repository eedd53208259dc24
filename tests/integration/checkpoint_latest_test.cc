// `latest` is never stale: after a commit, the run directory's latest
// symlink names the new checkpoint on every mount — on the mount that read
// (and followed) the old target as well as on another mount of the same
// cluster — through readlink, through a path walk via `latest/`, and in
// user.ckptfs.latest. The targets all have one length (step_100, step_200,
// step_300), so no size change tells a mount that the symlink changed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/checkpoint_support.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

class CheckpointLatestTest : public CheckpointTest {
 protected:
  // The target of symlink `path`, or "errno NAME" if readlink fails.
  static std::string ReadLink(const std::string& path) {
    char target[4096];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof(target));
    if (n < 0) return absl::StrCat("errno ", strerrorname_np(errno));
    return std::string(target, static_cast<size_t>(n));
  }

  // What a reader resolving `run`/latest sees on its mount: the symlink's
  // target, user.ckptfs.latest, and the shard read through `latest/`.
  struct Seen {
    std::string link;
    std::string xattr;
    std::string shard;
    uint64_t shard_ino = 0;
  };
  static Seen Resolve(const std::string& run) {
    Seen seen;
    seen.link = ReadLink(run + "/latest");
    seen.xattr = LatestOf(run);
    auto data = ReadWholeFile(run + "/latest/rank_0.pt");
    seen.shard = data.ok() ? *data : std::string(data.status().message());
    seen.shard_ino = InoOf(run + "/latest/rank_0.pt");
    return seen;
  }
};

TEST_F(CheckpointLatestTest, LatestFollowsEveryCommitOnTheMountThatReadItAndOnAnother) {
  auto second = cluster().Mount("mnt2");
  ASSERT_TRUE(second.ok()) << second.status();
  const std::vector<std::string> runs = {RunDir(), *second + "/run"};
  const std::string step_100 = TestData(4096, 100);
  ASSERT_TRUE(CommitFiles(RunDir() + "/step_100", {{"rank_0.pt", step_100}}).ok()) << Logs();
  // Both mounts read and follow latest -> step_100, and keep its shard open.
  std::vector<int> held;
  for (const std::string& run : runs) {
    const Seen seen = Resolve(run);
    EXPECT_EQ(seen.link, "step_100") << run;
    EXPECT_EQ(seen.xattr, "step_100") << run;
    EXPECT_TRUE(seen.shard == step_100) << run;
    const int fd = ::open((run + "/latest/rank_0.pt").c_str(), O_RDONLY);
    EXPECT_GE(fd, 0) << run << ": " << strerror(errno);
    held.push_back(fd);
  }

  const std::string step_200 = TestData(4096, 200);
  const std::string step_300 = TestData(4096, 300);
  ASSERT_TRUE(CommitFiles(RunDir() + "/step_200", {{"rank_0.pt", step_200}}).ok()) << Logs();
  for (const std::string& run : runs) EXPECT_EQ(ReadLink(run + "/latest"), "step_200") << run;
  ASSERT_TRUE(CommitFiles(RunDir() + "/step_300", {{"rank_0.pt", step_300}}).ok()) << Logs();

  for (const std::string& run : runs) {
    const Seen seen = Resolve(run);
    EXPECT_EQ(seen.link, "step_300") << run;
    EXPECT_EQ(seen.xattr, "step_300") << run;
    EXPECT_TRUE(seen.shard == step_300) << run << ": latest/rank_0.pt read another step";
    EXPECT_EQ(seen.shard_ino, InoOf(run + "/step_300/rank_0.pt")) << run;
  }
  // The handles opened through the old target still read step_100.
  for (int fd : held) {
    std::string got(step_100.size(), '\0');
    EXPECT_EQ(::pread(fd, got.data(), got.size(), 0), static_cast<ssize_t>(got.size()));
    EXPECT_TRUE(got == step_100);
    ::close(fd);
  }
}

}  // namespace
}  // namespace ckptfs::testing
