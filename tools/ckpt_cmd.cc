// `ckptfs ckpt declare|commit|keep|rm`: the writing half of checkpoint
// transactions, through the mount's extended attributes (mount_transactions.h);
// no metadata-service address is needed. Numbers are checked here (a usage
// error, status 2) before anything is sent; what only the service can judge
// (rank >= N, a re-declare with another N, a committed checkpoint) comes
// back as its errno and, for a failed commit, the checkpoint's abort reason.
// Runs on main's thread only.
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <iostream>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "tools/commands.h"
#include "tools/mount_transactions.h"

namespace ckptfs::tools {
namespace {

constexpr uint64_t kMaxRanks = 1048576;
constexpr uint64_t kMaxUint32 = 4294967295;

// `text` as a decimal in [min, max], or nothing.
std::optional<uint64_t> ParseDecimal(const std::string& text, uint64_t min, uint64_t max) {
  uint64_t value = 0;
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return std::nullopt;
  }
  return value;
}

// The message of a failed xattr call: "<path>: <strerror> (<NAME>)".
std::string Why(const absl::Status& status) { return std::string(status.message()); }

}  // namespace

CommandSpec CkptDeclareSpec() {
  return CommandSpec{
      "ckpt declare",
      "Declare DIR a checkpoint written by N ranks (creates DIR if missing).",
      "Sets user.ckptfs.ranks on DIR. Declaring again with the same N is harmless;\n"
      "another N is refused. The barrier's timeout counts from the first rank's\n"
      "commit: --timeout-s, else DIR's or its parent's user.ckptfs.commit_timeout_s,\n"
      "else the metadata service's --commit_timeout_s (600).",
      {{"timeout-s", "S", "abort unless all N ranks commit within S seconds of the first"}},
      {"DIR", "N"}};
}

int RunCkptDeclare(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptDeclareSpec();
  const std::string& dir = flags.positionals()[0];
  const std::optional<uint64_t> ranks = ParseDecimal(flags.positionals()[1], 1, kMaxRanks);
  if (!ranks) {
    return UsageError(spec, absl::StrCat("N must be a number of ranks in [1, ", kMaxRanks,
                                         "], got \"", flags.positionals()[1], "\""));
  }
  std::optional<uint64_t> timeout_s;
  if (flags.Given("timeout-s")) {
    timeout_s = ParseDecimal(flags.Get("timeout-s"), 1, kMaxUint32);
    if (!timeout_s) {
      return UsageError(spec, absl::StrCat("--timeout-s must be a number of seconds in [1, ",
                                           kMaxUint32, "], got \"", flags.Get("timeout-s"), "\""));
    }
  }
  // Check the nearest existing ancestor, so nothing is created off ckptfs.
  std::filesystem::path existing = std::filesystem::absolute(dir);
  std::error_code ec;
  while (existing.has_relative_path() && !std::filesystem::exists(existing, ec)) {
    existing = existing.parent_path();
  }
  if (absl::Status s = CheckOnCkptfs(existing.string()); !s.ok()) return Failure(spec, Why(s));
  std::filesystem::create_directories(dir, ec);
  if (ec) return Failure(spec, absl::StrCat("cannot create ", dir, ": ", ec.message()));
  if (timeout_s) {
    // Set only when it differs: a second declare of a checkpoint that has
    // since ended must not fail on the (then immutable) timeout attribute.
    absl::StatusOr<std::string> current = ReadXattr(dir, kCommitTimeoutXattr);
    if (!current.ok() || *current != absl::StrCat(*timeout_s)) {
      absl::Status s = WriteXattr(dir, kCommitTimeoutXattr, absl::StrCat(*timeout_s));
      if (!s.ok()) return Failure(spec, absl::StrCat("cannot set the timeout: ", Why(s)));
    }
  }
  absl::Status s = WriteXattr(dir, kRanksXattr, absl::StrCat(*ranks));
  if (!s.ok()) {
    std::string message =
        absl::StrCat("cannot declare ", dir, " a checkpoint of ", *ranks, " ranks: ", Why(s));
    absl::StatusOr<std::string> declared = ReadXattr(dir, kRanksXattr);
    if (declared.ok() && *declared != absl::StrCat(*ranks)) {
      absl::StrAppend(&message, " (it is declared for ", *declared, " ranks)");
    }
    return Failure(spec, message);
  }
  std::cout << dir << ": checkpoint of " << *ranks << " rank" << (*ranks == 1 ? "" : "s")
            << " declared\n";
  return 0;
}

CommandSpec CkptCommitSpec() {
  return CommandSpec{
      "ckpt commit",
      "Commit rank RANK of checkpoint DIR; waits until all ranks commit.",
      "Reads user.ckptfs.commit.RANK of DIR (any number of local ranks can wait so\n"
      "at once; a setxattr would hold DIR's lock). Exit status 0 once the checkpoint\n"
      "is committed (durable, and the run directory's `latest` names it); 1 if it\n"
      "was aborted (timeout, a file still open for writing, a failed write) or the\n"
      "request was refused, with the errno and the reason. A retry of the same rank\n"
      "waits for the same outcome.",
      {},
      {"DIR", "RANK"}};
}

int RunCkptCommit(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptCommitSpec();
  const std::string& dir = flags.positionals()[0];
  const std::optional<uint64_t> rank = ParseDecimal(flags.positionals()[1], 0, kMaxRanks - 1);
  if (!rank) {
    return UsageError(spec, absl::StrCat("RANK must be a number in [0, ", kMaxRanks - 1,
                                         "], got \"", flags.positionals()[1], "\""));
  }
  if (absl::Status s = CheckOnCkptfs(dir); !s.ok()) return Failure(spec, Why(s));
  absl::Status s = CommitRank(dir, *rank);
  if (!s.ok()) {
    std::string message = absl::StrCat("commit of rank ", *rank, " in ", dir,
                                       " failed: ", ErrnoText(ErrnoFromStatus(s)));
    absl::StatusOr<std::string> info_text = ReadXattr(dir, kInfoXattr);
    if (info_text.ok()) {
      absl::StatusOr<meta::CheckpointInfo> info = ParseCheckpointInfo(*info_text);
      if (info.ok() && !info->abort_reason().empty()) {
        absl::StrAppend(&message, ": ", info->abort_reason());
      }
    }
    return Failure(spec, message);
  }
  std::cout << dir << ": committed (rank " << *rank << ")\n";
  return 0;
}

CommandSpec CkptKeepSpec() {
  return CommandSpec{"ckpt keep",
                     "Keep only the K newest committed checkpoints of RUN_DIR.",
                     "Sets user.ckptfs.keep on RUN_DIR. On each commit in it, older committed\n"
                     "checkpoints, aborted ones and ones being removed (for over a minute) are\n"
                     "removed and their space reclaimed.",
                     {},
                     {"RUN_DIR", "K"}};
}

int RunCkptKeep(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptKeepSpec();
  const std::string& run_dir = flags.positionals()[0];
  const std::optional<uint64_t> keep = ParseDecimal(flags.positionals()[1], 1, kMaxUint32);
  if (!keep) {
    return UsageError(spec, absl::StrCat("K must be a number in [1, ", kMaxUint32, "], got \"",
                                         flags.positionals()[1], "\""));
  }
  if (absl::Status s = CheckOnCkptfs(run_dir); !s.ok()) return Failure(spec, Why(s));
  absl::Status s = WriteXattr(run_dir, kKeepXattr, absl::StrCat(*keep));
  if (!s.ok()) return Failure(spec, absl::StrCat("cannot set retention: ", Why(s)));
  std::cout << run_dir << ": keeps its " << *keep << " newest committed checkpoint"
            << (*keep == 1 ? "" : "s") << "\n";
  return 0;
}

CommandSpec CkptRmSpec() {
  return CommandSpec{
      "ckpt rm",
      "Remove checkpoint DIR (any state) and reclaim its space.",
      "Sets user.ckptfs.remove on DIR's parent: the whole checkpoint goes in one step\n"
      "and its chunks are freed at once. (`rm -r DIR` works too: files go one by one\n"
      "and are freed after the orphan grace.) `latest` moves to the newest remaining one.",
      {},
      {"DIR"}};
}

int RunCkptRm(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptRmSpec();
  std::string dir = flags.positionals()[0];
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::filesystem::path path(dir);
  const std::string name = path.filename().string();
  if (name.empty() || name == "." || name == ".." || dir == "/") {
    return UsageError(spec, absl::StrCat("DIR must name a checkpoint directory, got \"",
                                         flags.positionals()[0], "\""));
  }
  const std::string parent = path.has_parent_path() ? path.parent_path().string() : ".";
  if (absl::Status s = CheckOnCkptfs(parent); !s.ok()) return Failure(spec, Why(s));
  absl::Status s = WriteXattr(parent, kRemoveXattr, name);
  if (!s.ok()) {
    return Failure(spec, absl::StrCat("cannot remove ", dir, ": ", ErrnoText(ErrnoFromStatus(s))));
  }
  std::cout << "removed " << dir << "\n";
  return 0;
}

}  // namespace ckptfs::tools
