// See exposition.h.
#include "common/metrics/exposition.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace ckptfs::metrics {

std::string EscapeHelp(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string EscapeLabelValue(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) <= 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  // Shortest form that reads back the same: try fewer digits first.
  for (int digits = 6; digits < 17; ++digits) {
    char shorter[32];
    std::snprintf(shorter, sizeof(shorter), "%.*g", digits, value);
    if (std::strtod(shorter, nullptr) == value) return shorter;
  }
  return buf;
}

void AppendSample(std::string& out, absl::string_view name,
                  const std::vector<std::pair<std::string, std::string>>& labels,
                  absl::string_view value) {
  absl::StrAppend(&out, name);
  if (!labels.empty()) {
    out += '{';
    bool first = true;
    for (const auto& [label, label_value] : labels) {
      if (!first) out += ',';
      first = false;
      absl::StrAppend(&out, label, "=\"", EscapeLabelValue(label_value), "\"");
    }
    out += '}';
  }
  absl::StrAppend(&out, " ", value, "\n");
}

}  // namespace ckptfs::metrics
