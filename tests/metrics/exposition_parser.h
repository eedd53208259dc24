// A strict reader of the Prometheus text format 0.0.4 as ckptfs prints it,
// for tests: every line must be "# HELP name text", "# TYPE name type" or a
// sample "name{label="value",...} number"; every sample's family must have
// been typed before it; histogram series are checked for monotone buckets,
// a +Inf bucket equal to _count and a _sum.
//
// Thread-safety: none needed (pure functions).
#ifndef CKPTFS_TESTS_METRICS_EXPOSITION_PARSER_H_
#define CKPTFS_TESTS_METRICS_EXPOSITION_PARSER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram
  std::map<std::string, std::string> help;   // family -> text (unescaped)
  std::vector<Sample> samples;               // in the printed order

  // The value of the sample `name` with exactly `labels`; nullptr if none.
  const Sample* Find(const std::string& name,
                     const std::map<std::string, std::string>& labels = {}) const;
  // The sum over every sample named `name` (0 if none).
  double Sum(const std::string& name) const;
};

// Parses `text`; InvalidArgument naming the line for anything malformed.
absl::StatusOr<Exposition> ParseExposition(absl::string_view text);

}  // namespace ckptfs::testing

#endif  // CKPTFS_TESTS_METRICS_EXPOSITION_PARSER_H_
