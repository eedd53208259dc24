// kill -9 of the metadata service and of a storage server, then restart:
// everything closed before is intact, and the cluster goes on working.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

}  // namespace
}  // namespace ckptfs::testing
