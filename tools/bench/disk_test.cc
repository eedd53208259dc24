// Disk accounting: /proc/diskstats and uevent parsing, the device holding a
// directory, and the meter on this machine's own devices.
#include "tools/bench/disk.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

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

// Where the temp directory sits on a block device (not tmpfs or overlay),
// its device is listed in /proc/diskstats and the meter sees the bytes of
// a file written there with fsync.
TEST(DiskTest, MeterSeesAnFsyncedWriteOnTheDeviceHoldingIt) {
  std::optional<std::string> disk = DiskHolding(TempDir());
  if (!disk.has_value()) GTEST_SKIP() << TempDir() << " is not on a block device";
  DiskMeter meter(*disk);
  meter.Start();
  const std::string path = TempDir() + "/disk_test." + std::to_string(::getpid());
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << path;
    const std::string block(1 << 20, 'x');
    for (int i = 0; i < 4; ++i) ASSERT_EQ(::write(fd, block.data(), block.size()), 1 << 20);
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
  }
  ::unlink(path.c_str());
  std::optional<DiskUse> use = meter.Stop();
  ASSERT_TRUE(use.has_value()) << *disk << " not in /proc/diskstats";
  EXPECT_GE(use->written_bytes, 4u << 20) << *disk;
  EXPECT_GE(use->busy_s, 0.0);

  DiskMeter none("");
  none.Start();
  EXPECT_EQ(none.Stop(), std::nullopt);
  DiskMeter missing("no-such-disk");
  missing.Start();
  EXPECT_EQ(missing.Stop(), std::nullopt);
}

}  // namespace
}  // namespace ckptfs::bench
