// What the tools' tests against a real local cluster
// (cluster_scenario_test) use: whether this build's daemons and /dev/fuse
// are usable, where to look for free ports, whether a process is alive, a
// whole file's bytes.
// Each test target defines CKPTFS_BUILD_BIN_DIR. Thread-safe (no state).
#ifndef CKPTFS_TESTS_TOOLS_CLUSTER_TEST_SUPPORT_H_
#define CKPTFS_TESTS_TOOLS_CLUSTER_TEST_SUPPORT_H_

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ckptfs::tools::testing {

// Where a test starts looking for free ports (tools/ports.h): below the
// kernel's ephemeral range (32768-60999 by default), so that no client
// connection of a test running beside it can take one of them as its local
// port between the check and the daemon's bind; spread by pid (times
// `spread`) so that tests started together probe different ranges.
inline uint16_t PortSearchStart(int spread) {
  return static_cast<uint16_t>(10000 + (::getpid() * spread) % 20000);
}

// True when ckptfs-meta, ckptfs-storage and ckptfs-fuse are built and
// /dev/fuse can be opened (tests skip otherwise).
inline bool ClusterUsable() {
  for (const char* name : {"ckptfs-meta", "ckptfs-storage", "ckptfs-fuse"}) {
    if (::access(absl::StrCat(CKPTFS_BUILD_BIN_DIR, "/", name).c_str(), X_OK) != 0) {
      return false;
    }
  }
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// True while `pid` exists and is not a zombie.
inline bool ProcessAlive(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// True once `pid` is gone (or a zombie) within `limit`: a process that
// `down` saw leave (its /proc/PID/exe unreadable) may still be finishing
// its exit for a moment, its threads tearing down.
inline bool ProcessGoneWithin(pid_t pid, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + limit;
  while (ProcessAlive(pid)) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace ckptfs::tools::testing

#endif  // CKPTFS_TESTS_TOOLS_CLUSTER_TEST_SUPPORT_H_
