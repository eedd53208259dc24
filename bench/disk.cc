// See disk.h.
#include "bench/disk.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ckptfs::bench {
namespace {

constexpr uint64_t kSectorBytes = 512;

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<DiskCounters> ParseDiskStats(absl::string_view diskstats, absl::string_view device) {
  for (absl::string_view line : absl::StrSplit(diskstats, '\n')) {
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() < 3 || fields[2] != device) continue;
    // After major, minor and name: reads, reads merged, sectors read, ms
    // reading, writes, writes merged, sectors written, ms writing, in
    // flight, io_ticks, ...
    uint64_t sectors_read = 0, sectors_written = 0, io_ticks = 0;
    if (fields.size() < 13 || !absl::SimpleAtoi(fields[5], &sectors_read) ||
        !absl::SimpleAtoi(fields[9], &sectors_written) ||
        !absl::SimpleAtoi(fields[12], &io_ticks)) {
      return absl::InvalidArgumentError(
          absl::StrCat("/proc/diskstats line of ", device, " does not parse: \"", line, "\""));
    }
    return DiskCounters{sectors_read * kSectorBytes, sectors_written * kSectorBytes, io_ticks};
  }
  return absl::NotFoundError(absl::StrCat("no device ", device, " in /proc/diskstats"));
}

std::optional<std::string> ParseUeventDevName(absl::string_view uevent) {
  for (absl::string_view line : absl::StrSplit(uevent, '\n')) {
    if (absl::ConsumePrefix(&line, "DEVNAME=")) {
      line = absl::StripAsciiWhitespace(line);
      if (!line.empty()) return std::string(line);
    }
  }
  return std::nullopt;
}

std::optional<std::string> DiskHolding(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || major(st.st_dev) == 0) return std::nullopt;
  std::optional<std::string> uevent = ReadWholeFile(
      absl::StrCat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev), "/uevent"));
  if (!uevent.has_value()) return std::nullopt;
  return ParseUeventDevName(*uevent);
}

namespace {

std::optional<DiskCounters> ReadCounters(const std::string& device) {
  if (device.empty()) return std::nullopt;
  std::optional<std::string> text = ReadWholeFile("/proc/diskstats");
  if (!text.has_value()) return std::nullopt;
  absl::StatusOr<DiskCounters> counters = ParseDiskStats(*text, device);
  if (!counters.ok()) return std::nullopt;
  return *counters;
}

// b - a, or 0 when the counter went backwards (a device that was removed
// and added again starts from 0).
uint64_t Delta(uint64_t a, uint64_t b) { return b >= a ? b - a : 0; }
// The same for io_ticks, which the kernel prints as 32 bits: a wrap between
// the two readings is an ordinary step forward.
uint64_t Delta32(uint64_t a, uint64_t b) {
  return static_cast<uint32_t>(static_cast<uint32_t>(b) - static_cast<uint32_t>(a));
}

}  // namespace

void DiskMeter::Start() { start_ = ReadCounters(device_); }

std::optional<DiskUse> DiskMeter::Stop() {
  if (!start_.has_value()) return std::nullopt;
  std::optional<DiskCounters> end = ReadCounters(device_);
  if (!end.has_value()) return std::nullopt;
  DiskUse use;
  use.read_bytes = Delta(start_->read_bytes, end->read_bytes);
  use.written_bytes = Delta(start_->written_bytes, end->written_bytes);
  use.busy_s = static_cast<double>(Delta32(start_->busy_ms, end->busy_ms)) / 1e3;
  return use;
}

}  // namespace ckptfs::bench
