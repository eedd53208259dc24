// `ckptfs ckpt state|ls`: the reading half of checkpoint transactions, from
// the mount's extended attributes (mount_transactions.h): one checkpoint's state
// and numbers, or a run directory's checkpoints as a table (committed ones
// only, unless --all). Runs on main's thread only.
#include <algorithm>
#include <cerrno>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "tools/commands.h"
#include "tools/mount_transactions.h"
#include "tools/table.h"

namespace ckptfs::tools {
namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// Age of a checkpoint: since it ended, or since it was declared if pending.
std::string Age(const meta::CheckpointInfo& c, int64_t now_ms) {
  const int64_t since = c.ended_ms() != 0 ? c.ended_ms() : c.declared_ms();
  return since == 0 ? "-" : FormatAge(now_ms - since);
}

// Its size when it ended; unknown while pending or once names go.
std::string Size(const meta::CheckpointInfo& c) {
  return c.state() == meta::PENDING || c.state() == meta::REMOVING ? "-" : FormatBytes(c.bytes());
}

std::string AbortText(const meta::CheckpointInfo& c) {
  std::string text = c.abort_errno() != 0 ? ErrnoText(c.abort_errno()) : "aborted";
  if (!c.abort_reason().empty()) absl::StrAppend(&text, ": ", c.abort_reason());
  return text;
}

}  // namespace

CommandSpec CkptStateSpec() {
  return CommandSpec{
      "ckpt state",
      "Show checkpoint DIR: pending, committed, aborted or removing, ranks, size.",
      "The first line is the state alone (as user.ckptfs.state reads). Exit status 1\n"
      "if DIR is not a checkpoint.",
      {},
      {"DIR"}};
}

int RunCkptState(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptStateSpec();
  const std::string& dir = flags.positionals()[0];
  absl::StatusOr<std::string> text = ReadXattr(dir, kInfoXattr);
  if (!text.ok()) {
    if (ErrnoFromStatus(text.status()) == ENODATA) {
      return Failure(spec, absl::StrCat(dir,
                                        " is not a checkpoint (declare one with "
                                        "`ckptfs ckpt declare DIR N`)"));
    }
    return Failure(spec, std::string(text.status().message()));
  }
  absl::StatusOr<meta::CheckpointInfo> c = ParseCheckpointInfo(*text);
  if (!c.ok()) return Failure(spec, std::string(c.status().message()));
  const int64_t now_ms = NowMs();
  std::vector<std::vector<std::string>> rows = {
      {"name", c->name()},
      {"ranks", absl::StrCat(c->arrived(), "/", c->ranks(), " arrived")},
      {"declared", c->declared_ms() == 0 ? "-" : FormatAge(now_ms - c->declared_ms()) + " ago"},
      {"timeout", absl::StrCat(c->timeout_s(), "s from the first commit")},
  };
  if (c->first_commit_ms() != 0) {
    rows.push_back({"first commit", FormatAge(now_ms - c->first_commit_ms()) + " ago"});
  }
  if (c->state() != meta::PENDING) {
    rows.push_back({"files", absl::StrCat(c->files(), ", ", FormatBytes(c->bytes()))});
    if (c->ended_ms() != 0) {
      rows.push_back({"ended", FormatAge(now_ms - c->ended_ms()) + " ago"});
    }
  }
  if (c->state() == meta::ABORTED) rows.push_back({"error", AbortText(*c)});
  if (c->state() == meta::REMOVING && c->removing_ms() != 0) {
    rows.push_back({"removing", absl::StrCat("since ", FormatAge(now_ms - c->removing_ms()),
                                             " ago (a name in it was removed; no longer "
                                             "valid)")});
  }
  std::cout << CheckpointStateName(c->state()) << "\n" << FormatTable(rows);
  return 0;
}

CommandSpec CkptLsSpec() {
  return CommandSpec{"ckpt ls",
                     "List the checkpoints of RUN_DIR: name, state, ranks arrived/N, size, age.",
                     "Only committed checkpoints unless --all (pending, aborted and removing ones\n"
                     "are hidden from directory listings too, but reachable by name). Oldest\n"
                     "first; `latest` is marked.",
                     {{"all", "", "also pending, aborted and removing checkpoints"}},
                     {"RUN_DIR"}};
}

int RunCkptLs(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptLsSpec();
  const std::string& run_dir = flags.positionals()[0];
  const bool all = flags.GetBool("all");
  std::vector<meta::CheckpointInfo> list;
  absl::StatusOr<std::string> text = ReadXattr(run_dir, kCheckpointsXattr);
  if (text.ok()) {
    absl::StatusOr<std::vector<meta::CheckpointInfo>> parsed = ParseCheckpointList(*text);
    if (!parsed.ok()) return Failure(spec, std::string(parsed.status().message()));
    list = *std::move(parsed);
  } else if (ErrnoFromStatus(text.status()) != ENODATA) {
    return Failure(spec, std::string(text.status().message()));
  }
  absl::StatusOr<std::string> latest = ReadXattr(run_dir, kLatestXattr);
  if (!all) {
    list.erase(
        std::remove_if(list.begin(), list.end(),
                       [](const meta::CheckpointInfo& c) { return c.state() != meta::COMMITTED; }),
        list.end());
  }
  if (list.empty()) {
    std::cout << "no " << (all ? "" : "committed ") << "checkpoints in " << run_dir
              << (all ? "" : " (--all shows pending, aborted and removing ones)") << "\n";
    return 0;
  }
  std::stable_sort(list.begin(), list.end(),
                   [](const meta::CheckpointInfo& a, const meta::CheckpointInfo& b) {
                     return a.declared_ms() < b.declared_ms();
                   });
  const int64_t now_ms = NowMs();
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATE", "RANKS", "SIZE", "AGE", ""}};
  for (const meta::CheckpointInfo& c : list) {
    std::string note;
    if (latest.ok() && *latest == c.name()) note = "latest";
    if (c.state() == meta::ABORTED) note = AbortText(c);
    if (c.state() == meta::REMOVING) note = "names in it were removed; no longer valid";
    rows.push_back({c.name(), CheckpointStateName(c.state()),
                    absl::StrCat(c.arrived(), "/", c.ranks()), Size(c), Age(c, now_ms), note});
  }
  std::cout << FormatTable(rows);
  return 0;
}

}  // namespace ckptfs::tools
