// Disk accounting for ckptfs-bench: how busy one block device was during a
// phase and how many bytes it read and wrote, from /proc/diskstats before
// and after the phase.
//
// Why: on one machine a storage cluster and a plain directory often share a
// disk. When both targets move as many bytes through that disk as they
// save or load, at the same rate and with the disk busy through both
// storms, A/B compares two users of one disk; a target that reports more
// GB/s than its disk wrote left the rest in memory (a page cache). The
// bench prints these figures next to the throughput so that a reader can
// tell the cases apart.
//
// "Busy" is the kernel's io_ticks: time with at least one request in
// flight. A device that serves many requests at once (an SSD, a virtual
// disk on one) can do more while 100% busy; only the bytes per second at
// different queue depths show its limit.
//
// Which device: --disk NAME, else the one holding the baseline directory,
// else the one holding --dir (when it is on a block device: a FUSE mount,
// tmpfs or overlay has none). A partition or a device-mapper volume is
// measured as itself (its own /proc/diskstats line).
//
// Thread-safety: free functions are thread-safe; a DiskMeter is used by one
// thread.
#ifndef CKPTFS_BENCH_DISK_H_
#define CKPTFS_BENCH_DISK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs::bench {

// One device's counters from /proc/diskstats (sectors are 512 bytes there,
// whatever the device's own block size).
struct DiskCounters {
  uint64_t read_bytes = 0;
  uint64_t written_bytes = 0;
  // io_ticks: time with at least one request in flight. The kernel prints
  // it as a 32-bit count, so it wraps (every ~49.7 days of busy time).
  uint64_t busy_ms = 0;
};

// The counters of `device` (e.g. "vda", "nvme0n1p2") in the text of
// /proc/diskstats. NotFound when no line names it; InvalidArgument when its
// line does not parse.
absl::StatusOr<DiskCounters> ParseDiskStats(absl::string_view diskstats, absl::string_view device);

// The DEVNAME of a /sys/dev/block/MAJ:MIN/uevent text; none if absent.
std::optional<std::string> ParseUeventDevName(absl::string_view uevent);

// The block device the file system holding `path` lives on, by name; none
// when that file system has no block device (FUSE, tmpfs, overlay, NFS) or
// `path` cannot be stat'ed.
std::optional<std::string> DiskHolding(const std::string& path);

// What a device did between Start and Stop. The runner starts the meter
// just before a phase's ranks start and stops it just after they end, and
// the figures divide by the ranks' first-start-to-last-end time: the few
// milliseconds around the storm count too (busy % is capped at 100).
struct DiskUse {
  uint64_t read_bytes = 0;
  uint64_t written_bytes = 0;
  double busy_s = 0;
};

// Reads one device's counters at Start and Stop.
class DiskMeter {
 public:
  // An empty `device` measures nothing (Stop returns none).
  explicit DiskMeter(std::string device) : device_(std::move(device)) {}
  // Reads the device's counters now; a second Start starts over.
  void Start();
  // What the device did since Start; none when either reading failed.
  std::optional<DiskUse> Stop();

 private:
  std::string device_;
  std::optional<DiskCounters> start_;
};

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_DISK_H_
