// Translation of mount(8) arguments and options into a ckptfs-fuse command
// line (mount_options.h).
#include "fuse/mount_helper/mount_options.h"

#include <algorithm>
#include <array>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ckptfs::tools {
namespace {

enum class ValueKind { kBool, kValue };

struct CkptfsOption {
  absl::string_view name;  // the option and the ckptfs-fuse flag alike
  ValueKind kind;
};

// The ckptfs-fuse flags a mount may set (fuse/main.cc). Values are checked
// by ckptfs-fuse itself, which names the flag in its error.
constexpr std::array<CkptfsOption, 21> kCkptfsOptions = {{
    {"threads", ValueKind::kValue},          {"max_threads", ValueKind::kValue},
    {"attr_timeout_s", ValueKind::kValue},   {"entry_timeout_s", ValueKind::kValue},
    {"dir_timeout_s", ValueKind::kValue},    {"log_level", ValueKind::kValue},
    {"direct_io_writes", ValueKind::kBool},  {"direct_io_reads", ValueKind::kBool},
    {"writeback_cache", ValueKind::kBool},   {"splice", ValueKind::kBool},
    {"max_background", ValueKind::kValue},   {"write_buffer_mb", ValueKind::kValue},
    {"idle_buffer_mb", ValueKind::kValue},   {"read_cache_mb", ValueKind::kValue},
    {"readahead_chunks", ValueKind::kValue}, {"local_reads", ValueKind::kBool},
    {"local_writes", ValueKind::kBool},      {"max_inflight_chunks", ValueKind::kValue},
    {"read_ahead_kb", ValueKind::kValue},    {"metrics_listen", ValueKind::kValue},
    {"credential_file", ValueKind::kValue},
}};

// Options meant for mount(8), fstab or systemd, and options every ckptfs
// mount sets itself (fuse/mount.cc): dropped.
constexpr std::array<absl::string_view, 12> kDroppedOptions = {
    "defaults", "auto",  "noauto", "user",    "users",  "nouser",
    "owner",    "group", "rw",     "_netdev", "nofail", "default_permissions"};

bool IsDropped(absl::string_view name) {
  if (absl::StartsWith(name, "x-") || name == "comment" || name == "fsname" || name == "subtype") {
    return true;
  }
  return std::find(kDroppedOptions.begin(), kDroppedOptions.end(), name) != kDroppedOptions.end();
}

const CkptfsOption* FindCkptfsOption(absl::string_view name) {
  for (const CkptfsOption& option : kCkptfsOptions) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

absl::StatusOr<std::string> BoolValue(absl::string_view name, absl::string_view value,
                                      bool has_value) {
  if (!has_value) return std::string("true");
  if (value == "1" || value == "true" || value == "yes" || value == "on") return "true";
  if (value == "0" || value == "false" || value == "no" || value == "off") return "false";
  return absl::InvalidArgumentError(absl::StrCat(
      "option ", name, "=", value, ": the value must be 1/0, true/false, yes/no or on/off"));
}

absl::Status MissingValue(absl::string_view name, absl::string_view example) {
  return absl::InvalidArgumentError(
      absl::StrCat("option ", name, " needs a value (", name, "=", example, ")"));
}

}  // namespace

absl::StatusOr<MountRequest> ParseMountArgs(const std::vector<std::string>& args) {
  MountRequest request;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-o" || arg == "-t" || arg == "-N") {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      }
      const std::string& value = args[++i];
      if (arg == "-o") {
        for (absl::string_view item : absl::StrSplit(value, ',', absl::SkipEmpty())) {
          request.options.emplace_back(item);
        }
      } else if (arg == "-N") {
        return absl::InvalidArgumentError("-N (mount namespaces) is not supported");
      }
      // -t fuse.ckptfs: the type is ours by definition.
    } else if (absl::StartsWith(arg, "-o") && arg.size() > 2) {
      for (absl::string_view item : absl::StrSplit(arg.substr(2), ',', absl::SkipEmpty())) {
        request.options.emplace_back(item);
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      // Combined switches, e.g. -nv.
      for (char c : arg.substr(1)) {
        switch (c) {
          case 'f':
            request.fake = true;
            break;
          case 'v':
            request.verbose = true;
            break;
          case 's':
            break;  // sloppy: unknown options are libfuse's to judge
          case 'n':
            break;  // no mtab: there is none to write
          default:
            return absl::InvalidArgumentError(
                absl::StrCat("unknown switch -", std::string(1, c),
                             " (usage: mount.fuse.ckptfs META_ADDR MOUNTPOINT [-o OPTIONS])"));
        }
      }
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() < 2) {
    return absl::InvalidArgumentError(
        "usage: mount.fuse.ckptfs META_ADDR MOUNTPOINT [-o OPTIONS] "
        "(META_ADDR is the metadata service, e.g. 127.0.0.1:7000)");
  }
  if (positional.size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", positional[2], "\""));
  }
  request.source = positional[0];
  request.mountpoint = positional[1];
  const size_t colon = request.source.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == request.source.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the source \"", request.source,
                     "\" is not the metadata service's HOST:PORT (e.g. 127.0.0.1:7000)"));
  }
  return request;
}

absl::StatusOr<FuseInvocation> TranslateMount(const MountRequest& request,
                                              const std::string& default_config) {
  FuseInvocation invocation;
  std::string config = default_config;
  std::vector<std::string> flags;
  std::vector<std::string> fuse_options;
  for (const std::string& option : request.options) {
    const size_t eq = option.find('=');
    const bool has_value = eq != std::string::npos;
    const absl::string_view name = absl::string_view(option).substr(0, eq);
    const absl::string_view value =
        has_value ? absl::string_view(option).substr(eq + 1) : absl::string_view();
    if (name == "config") {
      if (!has_value || value.empty()) return MissingValue(name, "/etc/ckptfs/fuse.conf");
      config = std::string(value);
    } else if (name == "log") {
      if (!has_value || value.empty()) return MissingValue(name, "/var/log/ckptfs/mount.log");
      invocation.log_file = std::string(value);
    } else if (const CkptfsOption* known = FindCkptfsOption(name)) {
      std::string flag_value;
      if (known->kind == ValueKind::kBool) {
        absl::StatusOr<std::string> parsed = BoolValue(name, value, has_value);
        if (!parsed.ok()) return parsed.status();
        flag_value = *parsed;
      } else {
        if (!has_value || value.empty()) return MissingValue(name, "N");
        flag_value = std::string(value);
      }
      flags.push_back(absl::StrCat("--", name, "=", flag_value));
    } else if (!IsDropped(name)) {
      fuse_options.push_back(option);
    }
  }
  if (!config.empty()) invocation.args.push_back(absl::StrCat("--flagfile=", config));
  invocation.args.push_back(absl::StrCat("--meta=", request.source));
  invocation.args.push_back(absl::StrCat("--mountpoint=", request.mountpoint));
  for (std::string& flag : flags) invocation.args.push_back(std::move(flag));
  if (!fuse_options.empty()) {
    invocation.args.push_back(absl::StrCat("--fuse_options=", absl::StrJoin(fuse_options, ",")));
  }
  if (invocation.log_file.empty()) invocation.log_file = DefaultLogFile(request.mountpoint);
  return invocation;
}

std::string DefaultLogFile(const std::string& mountpoint) {
  std::string escaped;
  for (absl::string_view part : absl::StrSplit(mountpoint, '/', absl::SkipEmpty())) {
    if (!escaped.empty()) escaped += '-';
    escaped.append(part.data(), part.size());
  }
  if (escaped.empty()) escaped = "root";
  return absl::StrCat("/var/log/ckptfs/mount-", escaped, ".log");
}

}  // namespace ckptfs::tools
