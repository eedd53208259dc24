// Small POSIX file helpers for integration tests: whole-file write and read
// through a mount, deterministic test data, and a shared mounted-cluster
// fixture. All helpers report failures as absl::Status with the path and
// errno, so a failing test says what went wrong.
#ifndef CKPTFS_TESTS_INTEGRATION_POSIX_IO_H_
#define CKPTFS_TESTS_INTEGRATION_POSIX_IO_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"

namespace ckptfs::testing {

// `size` bytes of data determined by `seed` (cheap, not random-looking
// enough to compress away).
std::string TestData(size_t size, uint64_t seed);

// Creates/truncates `path` and writes `data` in `write_size` pieces, then
// closes (returning close's error).
absl::Status WriteWholeFile(const std::string& path, const std::string& data,
                            size_t write_size = 1 << 20);
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, size_t read_size = 1 << 20);
// pwrite of `data` at `offset` into an existing file, then close.
absl::Status PwriteFile(const std::string& path, uint64_t offset, const std::string& data);
// st_size from stat(2).
absl::StatusOr<uint64_t> FileSize(const std::string& path);
// Runs a shell command; returns its exit status, output into `output`.
int RunShell(const std::string& command, std::string* output);

// A cluster with 4 storage servers and one mount, shared by every test of
// a suite (started once in SetUpTestSuite).
class MountedClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;

  static LocalCluster& cluster() { return *cluster_; }
  static const std::string& mnt() { return mountpoint_; }
  // A fresh directory in the mount named after the running test.
  std::string TestDir() const { return test_dir_; }

 private:
  static std::unique_ptr<LocalCluster> cluster_;
  static std::string mountpoint_;
  std::string test_dir_;
};

}  // namespace ckptfs::testing

#endif  // CKPTFS_TESTS_INTEGRATION_POSIX_IO_H_
