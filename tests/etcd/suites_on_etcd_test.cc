// The metadata service's unit suites (tests/meta's meta_test: namespace,
// races, trees, membership, orphan reclaimer, checkpoint barrier and
// namespace rules) run again with their store on etcd: this test starts a
// 3-member etcd cluster and runs meta_test with CKPTFS_TEST_ETCD_ENDPOINTS
// set, which makes tests/meta's NamespaceFixture open an EtcdKvStore (a
// fresh key prefix per test) instead of RocksDB. Skipped without etcd.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

TEST(SuitesOnEtcd, MetaTestNamespaceAndCheckpointSuites) {
  if (EtcdBinary().empty()) GTEST_SKIP() << "etcd-server is not installed";
  auto etcd = EtcdCluster::Start(3);
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  std::string output;
  const int rc = RunShell(
      absl::StrCat("CKPTFS_TEST_ETCD_ENDPOINTS=", (*etcd)->endpoints(), " ", CKPTFS_META_TEST,
                   " --gtest_brief=1 --gtest_filter='", CKPTFS_ETCD_SUITES, "'"),
      &output);
  std::string failures;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StrContains(line, "FAILED") || absl::StrContains(line, "Failure") ||
        absl::StrContains(line, "PASSED")) {
      absl::StrAppend(&failures, line, "\n");
    }
  }
  EXPECT_EQ(rc, 0) << failures << "\n--- last output:\n"
                   << output.substr(output.size() > 8000 ? output.size() - 8000 : 0);
  EXPECT_TRUE(absl::StrContains(output, "PASSED")) << output.substr(0, 4000);
}

}  // namespace
}  // namespace ckptfs::testing
