// `ckptfs ckpt latest-name RUN_DIR [--set NAME | --none | --default]`: show
// or change the name of the symlink by which a run directory points at its
// newest committed checkpoint (user.ckptfs.latest_name, through the mount's
// extended attributes; mount_transactions.h). A framework that keeps its own file
// called `latest` in the run directory (DeepSpeed) needs another name, or
// none. The metadata service renames the symlink in the same transaction
// and refuses (EEXIST) a name that a file or directory already has. Runs on
// main's thread only.
#include <sys/xattr.h>

#include <cerrno>
#include <iostream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "tools/commands.h"
#include "tools/mount_transactions.h"

namespace ckptfs::tools {
namespace {

// removexattr(2); an attribute that was not set counts as removed.
absl::Status RemoveXattr(const std::string& path, const char* name) {
  if (::removexattr(path.c_str(), name) == 0 || errno == ENODATA) return absl::OkStatus();
  const int err = errno;
  return ErrnoStatus(err, absl::StrCat(path, ": ", ErrnoText(err)));
}

// What the run directory's pointer is called now, for people.
std::string Describe(const std::string& run_dir) {
  absl::StatusOr<std::string> name = ReadXattr(run_dir, kLatestNameXattr);
  if (!name.ok()) {
    return ErrnoFromStatus(name.status()) == ENODATA
               ? absl::StrCat("the latest symlink is named \"", kDefaultLatestName,
                              "\" (the default)")
               : absl::StrCat("cannot read ", kLatestNameXattr, ": ", name.status().message());
  }
  if (name->empty()) return absl::StrCat("no latest symlink (", kLatestNameXattr, " is empty)");
  return absl::StrCat("the latest symlink is named \"", absl::CEscape(*name), "\"");
}

}  // namespace

CommandSpec CkptLatestNameSpec() {
  return CommandSpec{
      "ckpt latest-name",
      "Show or set the name of RUN_DIR's symlink to its newest committed checkpoint.",
      "Without a flag, shows it (user.ckptfs.latest_name of RUN_DIR; \"latest\" when\n"
      "unset) and the newest committed checkpoint. --set NAME renames the symlink,\n"
      "--none removes it for good (a framework that writes its own file called\n"
      "`latest`, as DeepSpeed does), --default brings back \"latest\". The change\n"
      "applies at once; commits, removals and retention then keep the symlink\n"
      "under that name. A name that a file or directory in RUN_DIR already has is\n"
      "refused. Subdirectories do not inherit the setting; user.ckptfs.latest\n"
      "names the newest committed checkpoint with or without a symlink.",
      {
          {"set", "NAME", "name the symlink NAME"},
          {"none", "", "keep no symlink"},
          {"default", "", "name it \"latest\" again"},
      },
      {"RUN_DIR"}};
}

int RunCkptLatestName(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptLatestNameSpec();
  const std::string& run_dir = flags.positionals()[0];
  const int changes = static_cast<int>(flags.Given("set")) +
                      static_cast<int>(flags.GetBool("none")) +
                      static_cast<int>(flags.GetBool("default"));
  if (changes > 1) return UsageError(spec, "give at most one of --set, --none and --default");
  const std::string name = flags.Get("set");
  if (flags.Given("set")) {
    if (name.empty()) return UsageError(spec, "--set needs a name; --none keeps no symlink");
    if (absl::Status valid = ValidateName(name); !valid.ok()) {
      return UsageError(spec, absl::StrCat("NAME must be a file name in RUN_DIR, got \"",
                                           absl::CEscape(name), "\": ", valid.message()));
    }
  }
  if (absl::Status s = CheckOnCkptfs(run_dir); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  absl::Status changed;
  if (flags.Given("set") || flags.GetBool("none")) {
    changed = WriteXattr(run_dir, kLatestNameXattr, name);
  } else if (flags.GetBool("default")) {
    changed = RemoveXattr(run_dir, kLatestNameXattr);
  }
  if (!changed.ok()) {
    std::string message =
        absl::StrCat("cannot change the latest symlink of ", run_dir, ": ", changed.message());
    if (ErrnoFromStatus(changed) == EEXIST) {
      absl::StrAppend(&message, " (a file or directory in ", run_dir,
                      " has that name; remove or rename it, or choose another name)");
    }
    return Failure(spec, message);
  }
  std::cout << run_dir << ": " << Describe(run_dir) << "\n";
  absl::StatusOr<std::string> newest = ReadXattr(run_dir, kLatestXattr);
  if (newest.ok()) {
    std::cout << "  newest committed checkpoint: " << *newest << "\n";
  } else if (ErrnoFromStatus(newest.status()) == ENODATA) {
    std::cout << "  no committed checkpoint yet\n";
  }
  return 0;
}

}  // namespace ckptfs::tools
