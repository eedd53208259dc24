// A storage server whose disk fills up: the writer gets
// ENOSPC (from write or close, never a silent short file), what was stored
// before stays intact, and once space is freed (the file that did not fit
// removed) the same server takes writes again.
//
// The server's data directory is put on a small tmpfs (root only; the test
// skips itself where mounting one is refused), holding the files the server
// had, so it comes back as the same server.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

constexpr int kTmpfsMiB = 24;

// Unmounts the tmpfs on the way out, after the cluster (declared later)
// stopped its server.
struct TmpfsGuard {
  std::string path;
  ~TmpfsGuard() {
    if (path.empty()) return;
    std::string out;
    RunShell("umount -l '" + path + "'", &out);
    // The cluster's removal of its directory stopped at the mountpoint:
    // remove what is left of it.
    if (std::getenv("CKPTFS_KEEP_TEST_DIR") == nullptr) RemoveTree(path.substr(0, path.rfind('/')));
  }
};

uint64_t FreeBytes(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

// Writes `data` to `path` in 1 MiB pieces; the errno of the first failing
// write or of close (0 when all succeeded).
int WriteAndClose(const std::string& path, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return errno;
  int err = 0;
  for (size_t off = 0; off < data.size() && err == 0;) {
    const size_t n = std::min<size_t>(1 << 20, data.size() - off);
    const ssize_t w = ::write(fd, data.data() + off, n);
    if (w < 0) {
      err = errno;
    } else {
      off += static_cast<size_t>(w);
    }
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

TEST(FullDiskTest, WriterGetsEnospcStoredDataSurvivesAndTheServerRecovers) {
  TmpfsGuard tmpfs;
  LocalClusterOptions options;
  options.storage_servers = 1;
  options.meta_flags = {"--orphan_grace_s=0", "--reclaim_interval_s=1"};
  auto cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  LocalCluster& c = **cluster;

  // Move the server onto a small tmpfs, with what its directory held.
  const std::string dir = c.storage_dir(0);
  ASSERT_TRUE(c.StopStorage(0, SIGTERM).ok());
  std::string out;
  ASSERT_EQ(RunShell(absl::StrCat("cp -a '", dir, "' '", dir, ".before'"), &out), 0) << out;
  if (RunShell(absl::StrCat("mount -t tmpfs -o size=", kTmpfsMiB, "m tmpfs '", dir, "'"), &out) !=
      0) {
    GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << out;
  }
  tmpfs.path = dir;
  ASSERT_EQ(RunShell(absl::StrCat("cp -a '", dir, ".before/.' '", dir, "/'"), &out), 0) << out;
  ASSERT_TRUE(c.StartStorage(0).ok()) << c.DescribeLogs();
  ASSERT_TRUE(c.WaitServersAlive(1).ok()) << c.DescribeLogs();

  auto mnt = c.Mount("mnt");
  ASSERT_TRUE(mnt.ok()) << mnt.status();
  const std::string kept = TestData(8 << 20, 1);
  ASSERT_TRUE(WriteWholeFile(*mnt + "/kept.pt", kept).ok());

  // Twice what is left: the writer hears ENOSPC.
  const std::string too_big = TestData(2 * kTmpfsMiB << 20, 2);
  EXPECT_EQ(WriteAndClose(*mnt + "/too_big.pt", too_big), ENOSPC) << c.DescribeLogs();
  // Never a silent short file: what the file reads back is a prefix of
  // what was written, and its size is not the whole.
  absl::StatusOr<std::string> partial = ReadWholeFile(*mnt + "/too_big.pt");
  if (partial.ok()) {
    EXPECT_LT(partial->size(), too_big.size());
    EXPECT_TRUE(too_big.compare(0, partial->size(), *partial) == 0);
  }

  // What was stored before is intact, through this mount and a fresh one.
  absl::StatusOr<std::string> back = ReadWholeFile(*mnt + "/kept.pt");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == kept);
  auto mnt2 = c.Mount("mnt2");
  ASSERT_TRUE(mnt2.ok()) << mnt2.status();
  back = ReadWholeFile(*mnt2 + "/kept.pt");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == kept);

  // Free the space: the file that did not fit goes, its chunks with it.
  ASSERT_EQ(::unlink((*mnt + "/too_big.pt").c_str()), 0);
  const std::string next = TestData(12 << 20, 3);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (FreeBytes(dir) < next.size() + (2 << 20) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_GE(FreeBytes(dir), next.size()) << "space was not freed\n" << c.DescribeLogs();
  ASSERT_TRUE(WriteWholeFile(*mnt + "/next.pt", next).ok()) << c.DescribeLogs();
  back = ReadWholeFile(*mnt2 + "/next.pt");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == next);
  back = ReadWholeFile(*mnt2 + "/kept.pt");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == kept);

  ASSERT_TRUE(c.Unmount(*mnt).ok());
  ASSERT_TRUE(c.Unmount(*mnt2).ok());
}

}  // namespace
}  // namespace ckptfs::testing
