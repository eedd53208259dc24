// The `ckptfs` command line's flag parser: one small spec per subcommand.
//
// A subcommand declares its flags (name, value placeholder, default, help)
// and gets back the parsed values. Accepted forms: `--flag VALUE`,
// `--flag=VALUE`, and for boolean flags `--flag` alone; `-h`/`--help`
// requests the subcommand's usage. A flag name may be written with
// underscores for its dashes (`--timeout_s` is `--timeout-s`). A subcommand
// that declares positional arguments (`ckptfs ckpt commit DIR RANK`) gets
// exactly that many, in order, anywhere among the flags; any other word that
// is not a flag, unknown flags, repeated flags and missing values are usage
// errors (InvalidArgument), which the caller reports with Usage() and exit
// status 2.
// Thread-safe: pure functions over values.
#ifndef CKPTFS_TOOLS_FLAGS_H_
#define CKPTFS_TOOLS_FLAGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs::tools {

struct FlagSpec {
  std::string name;        // without the leading "--", e.g. "state-dir"
  std::string value_name;  // placeholder in usage, e.g. "DIR"; "" for a bool
  std::string help;
  std::string default_value;  // used when the flag is absent; "" for none
  bool required = false;
  bool is_bool() const { return value_name.empty(); }
};

struct CommandSpec {
  std::string name;     // e.g. "up", or "ckpt commit" for a command of a group
  std::string summary;  // one line for `ckptfs help`
  std::string details;  // free text printed after the flag list; may be ""
  std::vector<FlagSpec> flags;
  // Placeholders of the positional arguments, all required, e.g. {"DIR", "N"}.
  std::vector<std::string> positionals;
};

// The result of parsing one subcommand's arguments.
class ParsedFlags {
 public:
  // True when -h/--help was given; nothing else is validated then.
  bool help() const { return help_; }

  // True when the flag was given on the command line (defaults don't count).
  bool Given(absl::string_view name) const;

  // The flag's value, or its default. "true"/"" for boolean flags.
  // REQUIRES: `name` is declared in the spec the flags were parsed with.
  std::string Get(absl::string_view name) const;
  bool GetBool(absl::string_view name) const;

  // The value as an integer within [min, max]; InvalidArgument naming the
  // flag otherwise.
  absl::StatusOr<int64_t> GetInt(absl::string_view name, int64_t min, int64_t max) const;

  // The positional arguments, one per CommandSpec::positionals entry.
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  friend absl::StatusOr<ParsedFlags> ParseFlags(const CommandSpec& spec,
                                                const std::vector<std::string>& args);
  bool help_ = false;
  std::map<std::string, std::string, std::less<>> values_;  // given
  std::map<std::string, std::string, std::less<>> defaults_;
  std::vector<std::string> positionals_;
};

// Parses `args` (the arguments after the subcommand name) against `spec`.
// On a usage error returns InvalidArgument with a one-line message such as
// "unknown flag --sever (did you mean --servers?)".
absl::StatusOr<ParsedFlags> ParseFlags(const CommandSpec& spec,
                                       const std::vector<std::string>& args);

// The usage text of one subcommand: synopsis, flags with defaults, details.
std::string Usage(const CommandSpec& spec);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_FLAGS_H_
