// The pieces of the Prometheus text exposition format 0.0.4 that
// Registry::Render prints: HELP text and label-value escaping, sample value
// formatting, and a sample line. Pure functions; thread-safe.
//
//   # HELP ckptfs_storage_operations_total Requests served, by type.
//   # TYPE ckptfs_storage_operations_total counter
//   ckptfs_storage_operations_total{op="WRITE"} 12
#ifndef CKPTFS_COMMON_METRICS_EXPOSITION_H_
#define CKPTFS_COMMON_METRICS_EXPOSITION_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace ckptfs::metrics {

// The Content-Type of a rendered registry.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// HELP text: '\' -> "\\", newline -> "\n".
std::string EscapeHelp(absl::string_view text);
// A label value: '\' -> "\\", '"' -> "\"", newline -> "\n".
std::string EscapeLabelValue(absl::string_view text);
// A sample value or bucket bound: integers exactly (up to 2^53), other
// numbers with 17 significant digits, "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);

// Appends `name{l1="v1",...} value\n` (no braces without labels).
void AppendSample(std::string& out, absl::string_view name,
                  const std::vector<std::pair<std::string, std::string>>& labels,
                  absl::string_view value);

}  // namespace ckptfs::metrics

#endif  // CKPTFS_COMMON_METRICS_EXPOSITION_H_
