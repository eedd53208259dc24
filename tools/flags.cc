// See flags.h.
#include "tools/flags.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ckptfs::tools {
namespace {

const FlagSpec* FindFlag(const CommandSpec& spec, absl::string_view name) {
  for (const FlagSpec& flag : spec.flags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

// Levenshtein distance, for "did you mean" hints on typos.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string UnknownFlagMessage(const CommandSpec& spec, absl::string_view name) {
  std::string message = absl::StrCat("unknown flag --", name);
  const FlagSpec* best = nullptr;
  size_t best_distance = 3;  // suggest only close matches
  for (const FlagSpec& flag : spec.flags) {
    const size_t d = EditDistance(name, flag.name);
    if (d < best_distance) {
      best_distance = d;
      best = &flag;
    }
  }
  if (best != nullptr) absl::StrAppend(&message, " (did you mean --", best->name, "?)");
  return message;
}

}  // namespace

bool ParsedFlags::Given(absl::string_view name) const {
  return values_.find(name) != values_.end();
}

std::string ParsedFlags::Get(absl::string_view name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (auto it = defaults_.find(name); it != defaults_.end()) return it->second;
  return "";
}

bool ParsedFlags::GetBool(absl::string_view name) const { return Get(name) == "true"; }

absl::StatusOr<int64_t> ParsedFlags::GetInt(absl::string_view name, int64_t min,
                                            int64_t max) const {
  const std::string text = Get(name);
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be an integer in [", min,
                                                   ", ", max, "], got \"", text, "\""));
  }
  return value;
}

absl::StatusOr<ParsedFlags> ParseFlags(const CommandSpec& spec,
                                       const std::vector<std::string>& args) {
  ParsedFlags parsed;
  for (const FlagSpec& flag : spec.flags) {
    if (flag.is_bool()) {
      parsed.defaults_[flag.name] = "false";
    } else if (!flag.default_value.empty()) {
      parsed.defaults_[flag.name] = flag.default_value;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      parsed.help_ = true;
      return parsed;
    }
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      if (parsed.positionals_.size() < spec.positionals.size()) {
        parsed.positionals_.push_back(arg);
        continue;
      }
      return absl::InvalidArgumentError(
          spec.positionals.empty()
              ? absl::StrCat("unexpected argument \"", arg,
                             "\" (flags are written --flag VALUE or --flag=VALUE)")
              : absl::StrCat("unexpected argument \"", arg, "\" (expected ",
                             absl::StrJoin(spec.positionals, " "), ")"));
    }
    absl::string_view body = absl::string_view(arg).substr(2);
    const size_t eq = body.find('=');
    std::string name_text(body.substr(0, eq));
    std::replace(name_text.begin(), name_text.end(), '_', '-');
    const absl::string_view name = name_text;
    const FlagSpec* flag = FindFlag(spec, name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(UnknownFlagMessage(spec, name));
    }
    if (parsed.Given(name)) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " given twice"));
    }
    std::string value;
    if (eq != absl::string_view::npos) {
      value = std::string(body.substr(eq + 1));
      if (flag->is_bool()) {
        if (value != "true" && value != "false") {
          return absl::InvalidArgumentError(
              absl::StrCat("flag --", name, " takes no value (or =true / =false)"));
        }
      } else if (value.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value: --", name, " ", flag->value_name));
      }
    } else if (flag->is_bool()) {
      value = "true";
    } else {
      if (i + 1 >= args.size() || absl::StartsWith(args[i + 1], "--")) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value: --", name, " ", flag->value_name));
      }
      value = args[++i];
    }
    parsed.values_[std::string(name)] = std::move(value);
  }
  if (parsed.positionals_.size() < spec.positionals.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing ", spec.positionals[parsed.positionals_.size()], " (expected ",
                     absl::StrJoin(spec.positionals, " "), ")"));
  }
  for (const FlagSpec& flag : spec.flags) {
    if (flag.required && !parsed.Given(flag.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing required flag --", flag.name, " ", flag.value_name));
    }
  }
  return parsed;
}

std::string Usage(const CommandSpec& spec) {
  std::string synopsis = absl::StrCat("usage: ckptfs ", spec.name);
  for (const std::string& positional : spec.positionals) {
    absl::StrAppend(&synopsis, " ", positional);
  }
  for (const FlagSpec& flag : spec.flags) {
    std::string part = absl::StrCat("--", flag.name);
    if (!flag.is_bool()) absl::StrAppend(&part, " ", flag.value_name);
    absl::StrAppend(&synopsis, flag.required ? " " : " [", part, flag.required ? "" : "]");
  }
  std::string text = absl::StrCat(synopsis, "\n\n", spec.summary, "\n");
  if (!spec.flags.empty()) absl::StrAppend(&text, "\nflags:\n");
  for (const FlagSpec& flag : spec.flags) {
    std::string left = absl::StrCat("  --", flag.name);
    if (!flag.is_bool()) absl::StrAppend(&left, " ", flag.value_name);
    if (left.size() < 28)
      left.resize(28, ' ');
    else
      left += "  ";
    absl::StrAppend(&text, left, flag.help);
    if (!flag.default_value.empty()) {
      absl::StrAppend(&text, " (default ", flag.default_value, ")");
    }
    absl::StrAppend(&text, "\n");
  }
  if (!spec.details.empty()) absl::StrAppend(&text, "\n", spec.details, "\n");
  return text;
}

}  // namespace ckptfs::tools
