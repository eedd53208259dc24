// See posix_io.h.
#include "tests/integration/posix_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/errno_status.h"

namespace ckptfs::testing {

std::unique_ptr<LocalCluster> MountedClusterTest::cluster_;
std::string MountedClusterTest::mountpoint_;

std::string TestData(size_t size, uint64_t seed) {
  std::string out(size, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < size; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    for (size_t j = 0; j < 8 && i + j < size; ++j) out[i + j] = static_cast<char>(x >> (8 * j));
  }
  return out;
}

absl::Status WriteWholeFile(const std::string& path, const std::string& data, size_t write_size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
  size_t done = 0;
  while (done < data.size()) {
    const size_t n = std::min(write_size, data.size() - done);
    const ssize_t w = ::write(fd, data.data() + done, n);
    if (w < 0) {
      const int err = errno;
      ::close(fd);
      return SyscallError(err, absl::StrCat("write ", path, " at ", done));
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) return SyscallError(errno, absl::StrCat("close ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, size_t read_size) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
  std::string out;
  std::string buf(read_size, '\0');
  while (true) {
    const ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return SyscallError(err, absl::StrCat("read ", path, " at ", out.size()));
    }
    if (r == 0) break;
    out.append(buf.data(), static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

absl::Status PwriteFile(const std::string& path, uint64_t offset, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
  const ssize_t w = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
  const int err = errno;
  if (w != static_cast<ssize_t>(data.size())) {
    ::close(fd);
    return SyscallError(w < 0 ? err : EIO, absl::StrCat("pwrite ", path, " at ", offset));
  }
  if (::close(fd) != 0) return SyscallError(errno, absl::StrCat("close ", path));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return SyscallError(errno, absl::StrCat("stat ", path));
  return static_cast<uint64_t>(st.st_size);
}

int RunShell(const std::string& command, std::string* output) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) {
    if (output) output->append(buf, n);
  }
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void MountedClusterTest::SetUpTestSuite() {
  auto cluster = LocalCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  cluster_ = *std::move(cluster);
  auto mnt = cluster_->Mount("mnt");
  ASSERT_TRUE(mnt.ok()) << mnt.status() << "\n" << cluster_->DescribeLogs();
  mountpoint_ = *mnt;
}

void MountedClusterTest::TearDownTestSuite() {
  cluster_.reset();
  mountpoint_.clear();
}

void MountedClusterTest::SetUp() {
  ASSERT_NE(cluster_, nullptr) << "cluster failed to start";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  // A parameterized test's name holds a '/' ("Name/Param").
  test_dir_ = absl::StrCat(mountpoint_, "/", absl::StrReplaceAll(info->name(), {{"/", "_"}}));
  ASSERT_EQ(::mkdir(test_dir_.c_str(), 0755), 0)
      << "mkdir " << test_dir_ << ": " << strerror(errno) << "\n"
      << cluster_->DescribeLogs();
}

}  // namespace ckptfs::testing
