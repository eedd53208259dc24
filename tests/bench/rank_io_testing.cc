// See rank_io_testing.h.
#include "tests/bench/rank_io_testing.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "bench/rank_io.h"

namespace ckptfs::bench::testing {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/ckptfs-bench-test-XXXXXX");
  if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  MakePosixRankIo(path_)->RemoveTree("").IgnoreError();
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void PatchFile(const std::string& path, uint64_t offset, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  if (fd < 0) return;
  if (::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)) < 0) {
    // The test's later checks fail loudly.
  }
  ::close(fd);
}

}  // namespace ckptfs::bench::testing
