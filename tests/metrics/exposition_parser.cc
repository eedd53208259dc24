// See exposition_parser.h.
#include "tests/metrics/exposition_parser.h"

#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ckptfs::testing {
namespace {

bool IsNameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

bool ParseName(absl::string_view& in, std::string* name) {
  size_t i = 0;
  while (i < in.size() && IsNameChar(in[i], i == 0)) ++i;
  if (i == 0) return false;
  *name = std::string(in.substr(0, i));
  in.remove_prefix(i);
  return true;
}

bool ParseValue(absl::string_view text, double* value) {
  if (text == "+Inf")
    *value = HUGE_VAL;
  else if (text == "-Inf")
    *value = -HUGE_VAL;
  else if (text == "NaN")
    *value = NAN;
  else
    return absl::SimpleAtod(text, value) && !text.empty();
  return true;
}

// Parses {a="x",b="y"} (with escapes) at the front of `in`.
bool ParseLabels(absl::string_view& in, std::map<std::string, std::string>* labels) {
  if (in.empty() || in[0] != '{') return true;
  in.remove_prefix(1);
  while (!in.empty() && in[0] != '}') {
    std::string label;
    if (!ParseName(in, &label) || in.size() < 2 || in[0] != '=' || in[1] != '"') return false;
    in.remove_prefix(2);
    std::string value;
    bool closed = false;
    while (!in.empty()) {
      const char c = in[0];
      in.remove_prefix(1);
      if (c == '"') {
        closed = true;
        break;
      }
      if (c == '\\') {
        if (in.empty()) return false;
        const char e = in[0];
        in.remove_prefix(1);
        if (e == 'n')
          value += '\n';
        else if (e == '\\' || e == '"')
          value += e;
        else
          return false;
      } else if (c == '\n') {
        return false;
      } else {
        value += c;
      }
    }
    if (!closed || !labels->emplace(label, value).second) return false;
    if (!in.empty() && in[0] == ',') in.remove_prefix(1);
  }
  if (in.empty()) return false;
  in.remove_prefix(1);  // '}'
  return true;
}

// The family a sample belongs to (a histogram's _bucket/_sum/_count).
std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (absl::EndsWith(name, suffix)) {
      std::string base = name.substr(0, name.size() - suffix.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

absl::Status CheckHistograms(const Exposition& e) {
  // Series: family + labels without le.
  struct Series {
    std::vector<std::pair<double, double>> buckets;  // (le, count) in order
    bool has_sum = false;
    double count = -1;
  };
  std::map<std::pair<std::string, std::map<std::string, std::string>>, Series> series;
  for (const Sample& s : e.samples) {
    const std::string family = FamilyOf(s.name, e.types);
    if (e.types.at(family) != "histogram") continue;
    std::map<std::string, std::string> labels = s.labels;
    Series& one = series[{family, [&] {
                            auto l = labels;
                            l.erase("le");
                            return l;
                          }()}];
    if (absl::EndsWith(s.name, "_bucket")) {
      auto le = labels.find("le");
      double bound;
      if (le == labels.end() || !ParseValue(le->second, &bound)) {
        return absl::InvalidArgumentError(absl::StrCat(s.name, ": bucket without a valid le"));
      }
      one.buckets.emplace_back(bound, s.value);
    } else if (absl::EndsWith(s.name, "_sum")) {
      one.has_sum = true;
    } else {
      one.count = s.value;
    }
  }
  for (const auto& [key, one] : series) {
    const std::string& name = key.first;
    if (one.buckets.empty() || !one.has_sum || one.count < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": incomplete histogram series"));
    }
    for (size_t i = 1; i < one.buckets.size(); ++i) {
      if (!(one.buckets[i].first > one.buckets[i - 1].first) ||
          one.buckets[i].second < one.buckets[i - 1].second) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": buckets not monotone"));
      }
    }
    if (!std::isinf(one.buckets.back().first) || one.buckets.back().second != one.count) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": +Inf bucket != _count"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const Sample* Exposition::Find(const std::string& name,
                               const std::map<std::string, std::string>& labels) const {
  for (const Sample& s : samples) {
    if (s.name == name && s.labels == labels) return &s;
  }
  return nullptr;
}

double Exposition::Sum(const std::string& name) const {
  double total = 0;
  for (const Sample& s : samples) {
    if (s.name == name) total += s.value;
  }
  return total;
}

absl::StatusOr<Exposition> ParseExposition(absl::string_view text) {
  Exposition e;
  if (!text.empty() && text.back() != '\n') {
    return absl::InvalidArgumentError("the exposition does not end with a newline");
  }
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (line.empty()) continue;  // the split after the last newline
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, " (", why, "): ", line));
    };
    if (absl::ConsumePrefix(&line, "# HELP ")) {
      std::string name;
      if (!ParseName(line, &name) || !absl::ConsumePrefix(&line, " ")) return bad("HELP");
      std::string help;
      for (size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          help += line[i + 1] == 'n' ? '\n' : line[i + 1];
          ++i;
        } else {
          help += line[i];
        }
      }
      if (!e.help.emplace(name, help).second) return bad("second HELP");
      continue;
    }
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      std::string name;
      if (!ParseName(line, &name) || !absl::ConsumePrefix(&line, " ")) return bad("TYPE");
      if (line != "counter" && line != "gauge" && line != "histogram") return bad("type");
      if (!e.types.emplace(name, std::string(line)).second) return bad("second TYPE");
      continue;
    }
    if (line[0] == '#') return bad("unknown comment");
    Sample s;
    if (!ParseName(line, &s.name) || !ParseLabels(line, &s.labels) ||
        !absl::ConsumePrefix(&line, " ") || !ParseValue(line, &s.value)) {
      return bad("sample");
    }
    if (e.types.count(FamilyOf(s.name, e.types)) == 0) return bad("sample before its TYPE");
    e.samples.push_back(std::move(s));
  }
  if (absl::Status s = CheckHistograms(e); !s.ok()) return s;
  return e;
}

}  // namespace ckptfs::testing
