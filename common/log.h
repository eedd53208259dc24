// One-line logging: "2026-11-30T01:02:03.456Z I meta: message".
//
// Each line carries a severity letter (D, I, W, E) and the component that
// logged it. Lines go to stderr in one write() so concurrent threads never
// interleave within a line. The minimum severity and the component name are
// process-wide, set once from main. Thread-safe.
//
//   CKPTFS_LOG(kWarning) << "storage server " << addr << " unreachable";
#ifndef CKPTFS_COMMON_LOG_H_
#define CKPTFS_COMMON_LOG_H_

#include <sstream>
#include <string>

namespace ckptfs {

enum class LogSeverity { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Sets the component name printed on every line (e.g. "meta", "storage").
void SetLogComponent(const std::string& component);
// Lines below `severity` are dropped.
void SetMinLogSeverity(LogSeverity severity);
bool LogEnabled(LogSeverity severity);

// Buffers one line and writes it when destroyed.
class LogLine {
 public:
  explicit LogLine(LogSeverity severity) : severity_(severity) {}
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  ~LogLine();

  template <typename T>
  LogLine& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  LogSeverity severity_;
  std::ostringstream stream_;
};

}  // namespace ckptfs

#define CKPTFS_LOG(severity)                                    \
  if (!::ckptfs::LogEnabled(::ckptfs::LogSeverity::severity)) { \
  } else                                                        \
    ::ckptfs::LogLine(::ckptfs::LogSeverity::severity)

#endif  // CKPTFS_COMMON_LOG_H_
