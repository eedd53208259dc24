// See log.h.
#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ckptfs {
namespace {

std::atomic<int> g_min_severity{static_cast<int>(LogSeverity::kInfo)};

std::mutex& ComponentMutex() {
  static std::mutex mu;
  return mu;
}

std::string& Component() {
  static std::string* component = new std::string("ckptfs");
  return *component;
}

char SeverityLetter(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kDebug:
      return 'D';
    case LogSeverity::kInfo:
      return 'I';
    case LogSeverity::kWarning:
      return 'W';
    case LogSeverity::kError:
      return 'E';
  }
  return '?';
}

}  // namespace

void SetLogComponent(const std::string& component) {
  std::lock_guard<std::mutex> lock(ComponentMutex());
  Component() = component;
}

void SetMinLogSeverity(LogSeverity severity) { g_min_severity.store(static_cast<int>(severity)); }

bool LogEnabled(LogSeverity severity) {
  return static_cast<int>(severity) >= g_min_severity.load();
}

LogLine::~LogLine() {
  std::string component;
  {
    std::lock_guard<std::mutex> lock(ComponentMutex());
    component = Component();
  }
  std::string line = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  line += ' ';
  line += SeverityLetter(severity_);
  line += ' ';
  line += component;
  line += ": ";
  line += stream_.str();
  line += '\n';
  // One write per line; a short write to stderr is not worth a retry loop.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ckptfs
