// Disk accounting: /proc/diskstats and uevent parsing, the device holding a
// directory, and the meter on this machine's own devices.
#include "bench/disk.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

// Kernel 6.x lines: 14 fields after the name's three, then discards and
// flushes. vda: 1000 sectors read, 3000 written, io_ticks 420 ms.
constexpr char kDiskstats[] =
    " 253       0 vda 10 2 1000 5 20 4 3000 7 0 420 12 0 0 0 0 3 1\n"
    " 253       1 vda1 1 0 8 1 2 0 16 1 0 2 2 0 0 0 0 0 0\n"
    "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

TEST(DiskTest, ParsesSectorsAsBytesAndBusyTime) {
  auto vda = ParseDiskStats(kDiskstats, "vda");
  ASSERT_TRUE(vda.ok()) << vda.status();
  EXPECT_EQ(vda->read_bytes, 1000u * 512);
  EXPECT_EQ(vda->written_bytes, 3000u * 512);
  EXPECT_EQ(vda->busy_ms, 420u);
  // A partition is its own line, not its disk's prefix.
  auto part = ParseDiskStats(kDiskstats, "vda1");
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->written_bytes, 16u * 512);
  EXPECT_EQ(ParseDiskStats(kDiskstats, "vd").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseDiskStats(kDiskstats, "sda").status().code(), absl::StatusCode::kNotFound);
}

TEST(DiskTest, ShortOrGarbledLineIsAnError) {
  EXPECT_EQ(ParseDiskStats(" 8 0 sda 1 2 3\n", "sda").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDiskStats(" 8 0 sda 1 2 x 4 5 6 7 8 9 10 11\n", "sda").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DiskTest, UeventDevName) {
  EXPECT_EQ(ParseUeventDevName("MAJOR=253\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n"), "vda");
  EXPECT_EQ(ParseUeventDevName("MAJOR=0\nMINOR=5\n"), std::nullopt);
  EXPECT_EQ(ParseUeventDevName("DEVNAME=\n"), std::nullopt);
}

TEST(DiskTest, NoDiskUnderVirtualFileSystems) {
  EXPECT_EQ(DiskHolding("/proc"), std::nullopt);
  EXPECT_EQ(DiskHolding("/no/such/path"), std::nullopt);
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

// Removes a file at the end of a scope, also when an assertion returns early.
struct RemoveAtExit {
  std::string path;
  ~RemoveAtExit() { ::unlink(path.c_str()); }
};

// Where the temp directory sits on a block device (not tmpfs or overlay)
// that /proc/diskstats lists, the meter sees the bytes of a file written
// there with O_DIRECT (straight to the device, whatever a wrapper such as
// eatmydata does to fsync); buffered with fsync where O_DIRECT is refused.
TEST(DiskTest, MeterSeesAWriteThatReachesTheDeviceHoldingIt) {
  std::optional<std::string> disk = DiskHolding(TempDir());
  if (!disk.has_value()) {
    GTEST_SKIP() << TempDir() << " is not on a block device";
  }
  DiskMeter meter(*disk);
  meter.Start();
  const RemoveAtExit file{TempDir() + "/disk_test." + std::to_string(::getpid())};
  constexpr size_t kBytes = 4 << 20;
  void* memory = nullptr;
  ASSERT_EQ(::posix_memalign(&memory, 4096, kBytes), 0);
  std::unique_ptr<char, decltype(&std::free)> block(static_cast<char*>(memory), &std::free);
  std::memset(block.get(), 'x', kBytes);
  bool direct = true;
  UniqueFd fd(::open(file.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0600));
  if (!fd.valid() && errno == EINVAL) {
    direct = false;
    fd = UniqueFd(::open(file.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  }
  ASSERT_TRUE(fd.valid()) << file.path << ": " << std::strerror(errno);
  ASSERT_EQ(::write(fd.get(), block.get(), kBytes), static_cast<ssize_t>(kBytes));
  if (!direct) {
    ASSERT_EQ(::fsync(fd.get()), 0);
  }
  std::optional<DiskUse> use = meter.Stop();
  if (!use.has_value()) {
    GTEST_SKIP() << *disk << " is not in /proc/diskstats here";
  }
  EXPECT_GE(use->written_bytes, kBytes) << *disk << (direct ? " (O_DIRECT)" : " (fsync)");

  DiskMeter none("");
  none.Start();
  EXPECT_EQ(none.Stop(), std::nullopt);
  DiskMeter missing("no-such-disk");
  missing.Start();
  EXPECT_EQ(missing.Stop(), std::nullopt);
}

}  // namespace
}  // namespace ckptfs::bench
