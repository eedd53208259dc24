// The name of a run directory's `latest` symlink (user.ckptfs.latest_name)
// through a real mount: with no symlink, DeepSpeed's own `latest` file
// (open 'w', the tag written, closed after every save) lives beside ckptfs's
// commits untouched while user.ckptfs.latest still names the newest
// committed checkpoint; with another name, the symlink of that name follows
// the commits; a name a file already has is refused; `ckptfs ckpt
// latest-name` shows and sets it.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
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

using CheckpointLatestNameTest = CheckpointTest;

// The target of symlink `path`, or "" if it is none.
std::string ReadLink(const std::string& path) {
  char target[4096];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof(target));
  return n < 0 ? "" : std::string(target, static_cast<size_t>(n));
}

bool IsRegularFile(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// What DeepSpeed does after each save: open(save_dir/latest, "w"), write
// the tag, close. The exit status of that Python.
int WriteLatestAsDeepSpeed(const std::string& save_dir, const std::string& tag,
                           std::string* output) {
  return RunShell(absl::StrCat("/usr/bin/python3 -c 'import os, sys\n"
                               "with open(os.path.join(sys.argv[1], \"latest\"), \"w\") as f:\n"
                               "    f.write(sys.argv[2])' '",
                               save_dir, "' '", tag, "' 2>&1"),
                  output);
}

// What DeepSpeed does on load: read the tag back. "" on failure.
std::string ReadLatestAsDeepSpeed(const std::string& save_dir) {
  std::string out;
  const int status =
      RunShell(absl::StrCat("/usr/bin/python3 -c 'import os, sys\n"
                            "with open(os.path.join(sys.argv[1], \"latest\"), \"r\") as f:\n"
                            "    sys.stdout.write(f.read().strip())' '",
                            save_dir, "' 2>&1"),
               &out);
  return status == 0 ? out : "";
}

TEST_F(CheckpointLatestNameTest, NoSymlinkLetsDeepSpeedKeepItsOwnLatestFile) {
  std::string out;
  ASSERT_EQ(Ckptfs(absl::StrCat("ckpt latest-name ", RunDir(), " --none"), &out), 0) << out;
  EXPECT_NE(out.find("no latest symlink"), std::string::npos) << out;
  char value[64];
  ASSERT_EQ(::getxattr(RunDir().c_str(), kLatestNameXattr, value, sizeof(value)), 0);

  for (const char* tag : {"global_step100", "global_step200"}) {
    const std::string ckpt = RunDir() + "/" + tag;
    ASSERT_TRUE(CommitFiles(ckpt, {{"mp_rank_00_model_states.pt", TestData(65536, 1)}}).ok());
    out.clear();
    ASSERT_EQ(WriteLatestAsDeepSpeed(RunDir(), tag, &out), 0) << out;
    EXPECT_TRUE(IsRegularFile(RunDir() + "/latest"));
    EXPECT_EQ(ReadLatestAsDeepSpeed(RunDir()), tag);
    EXPECT_EQ(LatestOf(RunDir()), tag);  // user.ckptfs.latest, with no symlink
  }
  // A commit without DeepSpeed's write leaves its file as it was.
  ASSERT_TRUE(CommitFiles(RunDir() + "/global_step300", {{"m.pt", TestData(4096, 2)}}).ok());
  EXPECT_TRUE(IsRegularFile(RunDir() + "/latest"));
  EXPECT_EQ(ReadLatestAsDeepSpeed(RunDir()), "global_step200");
  EXPECT_EQ(LatestOf(RunDir()), "global_step300");
  EXPECT_EQ(ListNames(RunDir()), (std::vector<std::string>{"global_step100", "global_step200",
                                                           "global_step300", "latest"}));
  // Its removal too.
  ASSERT_EQ(RunShell(absl::StrCat("/usr/bin/python3 -c 'import shutil, sys; "
                                  "shutil.rmtree(sys.argv[1])' '",
                                  RunDir(), "/global_step300' 2>&1"),
                     &out),
            0)
      << out;
  EXPECT_EQ(LatestOf(RunDir()), "global_step200");
  EXPECT_EQ(ReadLatestAsDeepSpeed(RunDir()), "global_step200");
  // Back to the default is refused while DeepSpeed's file has the name.
  out.clear();
  EXPECT_EQ(Ckptfs(absl::StrCat("ckpt latest-name ", RunDir(), " --default"), &out), 1) << out;
  EXPECT_NE(out.find("(EEXIST)"), std::string::npos) << out;
  EXPECT_TRUE(IsRegularFile(RunDir() + "/latest"));
  out.clear();
  ASSERT_EQ(Ckptfs(absl::StrCat("ckpt latest-name ", RunDir()), &out), 0) << out;
  EXPECT_NE(out.find("no latest symlink"), std::string::npos) << out;
  EXPECT_NE(out.find("newest committed checkpoint: global_step200"), std::string::npos) << out;
}

TEST_F(CheckpointLatestNameTest, ASymlinkOfAnotherNameFollowsTheCommits) {
  ASSERT_TRUE(CommitFiles(RunDir() + "/step_1", {{"model.pt", TestData(4096, 1)}}).ok());
  ASSERT_EQ(ReadLink(RunDir() + "/latest"), "step_1");
  ASSERT_EQ(::setxattr(RunDir().c_str(), kLatestNameXattr, "latest_committed", 16, 0), 0)
      << strerror(errno);
  EXPECT_FALSE(Exists(RunDir() + "/latest"));
  EXPECT_EQ(ReadLink(RunDir() + "/latest_committed"), "step_1");

  const std::string data = TestData(100000, 2);
  ASSERT_TRUE(CommitFiles(RunDir() + "/step_2", {{"model.pt", data}}).ok());
  EXPECT_EQ(ReadLink(RunDir() + "/latest_committed"), "step_2");
  EXPECT_FALSE(Exists(RunDir() + "/latest"));
  EXPECT_EQ(ListNames(RunDir()),
            (std::vector<std::string>{"latest_committed", "step_1", "step_2"}));
  auto resumed = ReadWholeFile(RunDir() + "/latest_committed/model.pt");
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_TRUE(*resumed == data);
  std::string out;
  ASSERT_EQ(Ckptfs(absl::StrCat("ckpt latest-name ", RunDir()), &out), 0) << out;
  EXPECT_NE(out.find("named \"latest_committed\""), std::string::npos) << out;
  EXPECT_NE(out.find("newest committed checkpoint: step_2"), std::string::npos) << out;

  // A name a file already has is refused, and nothing moves.
  ASSERT_TRUE(WriteWholeFile(RunDir() + "/notes", "mine").ok());
  EXPECT_EQ(::setxattr(RunDir().c_str(), kLatestNameXattr, "notes", 5, 0), -1);
  EXPECT_EQ(errno, EEXIST);
  out.clear();
  EXPECT_EQ(Ckptfs(absl::StrCat("ckpt latest-name ", RunDir(), " --set notes"), &out), 1) << out;
  EXPECT_NE(out.find("has that name"), std::string::npos) << out;
  EXPECT_EQ(ReadLink(RunDir() + "/latest_committed"), "step_2");
  EXPECT_EQ(*ReadWholeFile(RunDir() + "/notes"), "mine");

  // --set renames it; --default brings `latest` back.
  out.clear();
  ASSERT_EQ(Ckptfs(absl::StrCat("ckpt latest-name ", RunDir(), " --set newest"), &out), 0) << out;
  EXPECT_FALSE(Exists(RunDir() + "/latest_committed"));
  EXPECT_EQ(ReadLink(RunDir() + "/newest"), "step_2");
  out.clear();
  ASSERT_EQ(Ckptfs(absl::StrCat("ckpt latest-name ", RunDir(), " --default"), &out), 0) << out;
  EXPECT_NE(out.find("named \"latest\" (the default)"), std::string::npos) << out;
  EXPECT_FALSE(Exists(RunDir() + "/newest"));
  EXPECT_EQ(ReadLink(RunDir() + "/latest"), "step_2");
  EXPECT_EQ(::getxattr(RunDir().c_str(), kLatestNameXattr, nullptr, 0), -1);
  EXPECT_EQ(errno, ENODATA);
}

}  // namespace
}  // namespace ckptfs::testing
