// Tests of the state directory and the cluster.state format (tools/state_dir.h).
#include "tools/state_dir.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

#include "gtest/gtest.h"

namespace ckptfs::tools {
namespace {

ClusterState SampleState() {
  ClusterState state;
  state.meta_address = "127.0.0.1:7000";
  state.mountpoint = "/mnt/ckpt with space";
  state.daemons.push_back({"meta",
                           "127.0.0.1:7000",
                           "/s/meta",
                           "/s/logs/meta.log",
                           {101, 555, "/bin/ckptfs-meta"},
                           "127.0.0.1:9400"});
  state.daemons.push_back({"storage-0",
                           "127.0.0.1:7001",
                           "/s/storage-0",
                           "/s/logs/storage-0.log",
                           {102, 556, "/bin/ckptfs-storage"}});
  state.daemons.push_back(
      {"fuse", "/mnt/ckpt with space", "", "/s/logs/fuse.log", {103, 557, "/bin/ckptfs-fuse"}});
  return state;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/ckptfs-tools-test-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ClusterStateTest, RoundTrips) {
  const ClusterState state = SampleState();
  auto parsed = ParseClusterState(SerializeClusterState(state));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->meta_address, state.meta_address);
  EXPECT_EQ(parsed->mountpoint, state.mountpoint);
  ASSERT_EQ(parsed->daemons.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(parsed->daemons[i].role, state.daemons[i].role);
    EXPECT_EQ(parsed->daemons[i].address, state.daemons[i].address);
    EXPECT_EQ(parsed->daemons[i].data_dir, state.daemons[i].data_dir);
    EXPECT_EQ(parsed->daemons[i].log_path, state.daemons[i].log_path);
    EXPECT_EQ(parsed->daemons[i].process.pid, state.daemons[i].process.pid);
    EXPECT_EQ(parsed->daemons[i].process.start_time, state.daemons[i].process.start_time);
    EXPECT_EQ(parsed->daemons[i].process.exe, state.daemons[i].process.exe);
    EXPECT_EQ(parsed->daemons[i].metrics_address, state.daemons[i].metrics_address);
  }
  EXPECT_EQ(parsed->daemons[0].metrics_address, "127.0.0.1:9400");
}

TEST(ClusterStateTest, RejectsDamagedFiles) {
  EXPECT_FALSE(ParseClusterState("meta_address=x\nno equals sign\n").ok());
  EXPECT_FALSE(ParseClusterState("meta_address=x\n").ok());                 // no daemons=
  EXPECT_FALSE(ParseClusterState("daemons=1\ndaemon.0.role=meta\n").ok());  // no pid
  EXPECT_FALSE(ParseClusterState("daemons=1\ndaemon.0.role=meta\ndaemon.0.pid=abc\n"
                                 "daemon.0.start_time=1\n")
                   .ok());
  // Unknown keys are ignored.
  auto parsed = ParseClusterState("daemons=0\nfuture_key=1\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->daemons.empty());
}

TEST(StateDirTest, CreatesLayoutAndSavesLoadsRemoves) {
  TempDir tmp;
  auto dir = StateDir::Open(tmp.path() + "/state/", /*create=*/true);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->path(), tmp.path() + "/state");
  EXPECT_TRUE(std::filesystem::is_directory(dir->MetaDir()));
  EXPECT_TRUE(std::filesystem::is_directory(tmp.path() + "/state/logs"));
  EXPECT_EQ(dir->StorageDir(3), tmp.path() + "/state/storage-3");
  EXPECT_EQ(dir->LogPath("fuse"), tmp.path() + "/state/logs/fuse.log");

  auto empty = dir->Load();
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());

  ASSERT_TRUE(dir->Save(SampleState()).ok());
  auto loaded = dir->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->daemons.size(), 3u);

  ASSERT_TRUE(dir->Remove().ok());
  ASSERT_TRUE(dir->Remove().ok());  // already gone is fine
  EXPECT_FALSE(dir->Load()->has_value());
}

TEST(StateDirTest, LockIsExclusive) {
  TempDir tmp;
  auto first = StateDir::Open(tmp.path(), /*create=*/true);
  auto second = StateDir::Open(tmp.path(), /*create=*/false);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(first->Lock().ok());
  absl::Status s = second->Lock();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  { StateDir released = std::move(*first); }  // drops the lock
  EXPECT_TRUE(second->Lock().ok());
}

// It holds the credential: a directory others may write to is refused.
TEST(StateDirTest, DirectoryOthersMayWriteToIsRefused) {
  TempDir tmp;
  const std::string path = tmp.path() + "/shared";
  ASSERT_EQ(::mkdir(path.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0777), 0);  // whatever the umask
  auto dir = StateDir::Open(path, /*create=*/true);
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("writable by you only"), std::string::npos) << dir.status();
  ASSERT_EQ(::chmod(path.c_str(), 0755), 0);
  EXPECT_TRUE(StateDir::Open(path, /*create=*/true).ok());
}

TEST(AbsolutePathTest, NormalizesRelativePaths) {
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(AbsolutePath("a/./b/../c/"), cwd + "/a/c");
  EXPECT_EQ(AbsolutePath("/"), "/");
}

}  // namespace
}  // namespace ckptfs::tools
