// `ckptfs ckpt gc RUN_DIR`: reclaim space now. Applies the run directory's
// retention at once instead of at its next commit — the same rule the
// metadata service applies (CheckpointStore::Retain): every ABORTED
// checkpoint, every REMOVING one (committed, then partly deleted with
// unlink/rmdir), and the COMMITTED ones older (by end time) than the newest
// K of user.ckptfs.keep (or --keep K) — by removing each through
// user.ckptfs.remove. Each removal wakes the service's orphan reclaimer, so
// their chunks are freed within moments. Never removes a PENDING checkpoint
// or `latest`. Files unlinked outside checkpoints are left to the service's
// orphan grace (--orphan_grace_s): a handle still open may read them.
// Runs on main's thread only.
#include <algorithm>
#include <cerrno>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "tools/commands.h"
#include "tools/mount_transactions.h"
#include "tools/table.h"

namespace ckptfs::tools {

CommandSpec CkptGcSpec() {
  return CommandSpec{
      "ckpt gc",
      "Reclaim space in RUN_DIR now: remove aborted and out-of-retention checkpoints.",
      "Applies retention now rather than at the next commit: removes every aborted\n"
      "checkpoint that ended more than --grace-s ago (a rank may still hold its\n"
      "files open), every one being removed (a name in it was unlinked or\n"
      "rmdir'ed) for more than --grace-s (whoever does it may still be at it) and,\n"
      "with user.ckptfs.keep = K on RUN_DIR (`ckptfs ckpt keep`) or --keep K, the\n"
      "committed ones older than the newest K. Pending checkpoints and `latest`\n"
      "are never removed. The metadata service frees the chunks of\n"
      "what is removed at once; files deleted outside checkpoints are freed after\n"
      "its --orphan_grace_s, since an open handle may still read them.",
      {
          {"keep", "K",
           "keep the K newest committed checkpoints (default: RUN_DIR's user.ckptfs.keep)"},
          {"grace-s", "S",
           "leave aborted checkpoints that ended, and removing ones whose removal began, less "
           "than S seconds ago",
           "60"},
          {"dry-run", "", "only say what would be removed"},
      },
      {"RUN_DIR"}};
}

int RunCkptGc(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptGcSpec();
  const std::string& run_dir = flags.positionals()[0];
  absl::StatusOr<int64_t> grace_s = flags.GetInt("grace-s", 0, int64_t{1} << 31);
  if (!grace_s.ok()) return UsageError(spec, std::string(grace_s.status().message()));
  std::optional<uint64_t> keep;
  if (flags.Given("keep")) {
    absl::StatusOr<int64_t> k = flags.GetInt("keep", 1, 4294967295);
    if (!k.ok()) return UsageError(spec, std::string(k.status().message()));
    keep = static_cast<uint64_t>(*k);
  }
  if (absl::Status s = CheckOnCkptfs(run_dir); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  if (!keep) {
    absl::StatusOr<std::string> stored = ReadXattr(run_dir, kKeepXattr);
    uint64_t k = 0;
    std::string text = stored.ok() ? *stored : "";
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (stored.ok() && absl::SimpleAtoi(text, &k) && k > 0) keep = k;
  }
  std::vector<meta::CheckpointInfo> list;
  absl::StatusOr<std::string> text = ReadXattr(run_dir, kCheckpointsXattr);
  if (text.ok()) {
    absl::StatusOr<std::vector<meta::CheckpointInfo>> parsed = ParseCheckpointList(*text);
    if (!parsed.ok()) return Failure(spec, std::string(parsed.status().message()));
    list = *std::move(parsed);
  } else if (ErrnoFromStatus(text.status()) != ENODATA) {
    return Failure(spec, absl::StrCat("cannot list the checkpoints of ", run_dir, ": ",
                                      text.status().message()));
  }
  absl::StatusOr<std::string> latest = ReadXattr(run_dir, kLatestXattr);
  const std::string latest_name = latest.ok() ? *latest : "";

  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  std::vector<std::pair<meta::CheckpointInfo, std::string>> doomed;  // with the reason
  int young_aborted = 0, young_removing = 0;
  std::vector<meta::CheckpointInfo> committed;
  for (const meta::CheckpointInfo& c : list) {
    if (c.state() == meta::ABORTED) {
      if (now_ms - c.ended_ms() < *grace_s * 1000) {
        ++young_aborted;
      } else {
        doomed.emplace_back(c, "aborted");
      }
    } else if (c.state() == meta::REMOVING) {
      if (now_ms - c.removing_ms() < *grace_s * 1000) {
        ++young_removing;
      } else {
        doomed.emplace_back(c, "partly removed");
      }
    } else if (c.state() == meta::COMMITTED) {
      committed.push_back(c);
    }
  }
  if (keep && committed.size() > *keep) {
    std::sort(committed.begin(), committed.end(),
              [](const meta::CheckpointInfo& a, const meta::CheckpointInfo& b) {
                return a.ended_ms() > b.ended_ms();  // newest first
              });
    for (size_t i = *keep; i < committed.size(); ++i) {
      if (committed[i].name() == latest_name) continue;
      doomed.emplace_back(committed[i], absl::StrCat("older than the newest ", *keep));
    }
  }

  const bool dry_run = flags.GetBool("dry-run");
  uint64_t freed = 0;
  size_t failed = 0;
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATE", "SIZE", "WHY", ""}};
  for (const auto& [c, why] : doomed) {
    std::string outcome = dry_run ? "would remove" : "removed";
    if (!dry_run) {
      // Only what was listed: a checkpoint that took the name since (a
      // retried step) is not removed (ESTALE).
      // (A mount too old to list inodes: by name alone, as before.)
      absl::Status s = WriteXattr(
          run_dir, kRemoveXattr,
          c.ino() != 0 ? CheckpointRemovalValue(c.name(), c.ino(), c.state()) : c.name());
      if (!s.ok()) {
        ++failed;
        outcome = ErrnoFromStatus(s) == ESTALE
                      ? std::string("NOT removed: it changed since it was listed")
                      : absl::StrCat("NOT removed: ", ErrnoText(ErrnoFromStatus(s)));
      } else if (c.state() == meta::COMMITTED) {
        freed += c.bytes();
      }
    }
    rows.push_back({c.name(), CheckpointStateName(c.state()),
                    c.state() == meta::COMMITTED ? FormatBytes(c.bytes()) : "-", why, outcome});
  }
  if (doomed.empty()) {
    std::cout << run_dir << ": nothing to reclaim";
  } else {
    std::cout << FormatTable(rows) << run_dir << ": " << (dry_run ? "would remove " : "removed ")
              << (doomed.size() - failed) << " checkpoint"
              << (doomed.size() - failed == 1 ? "" : "s");
    if (!dry_run) {
      std::cout << ", " << FormatBytes(freed)
                << " of committed data; the metadata service frees their chunks now";
    }
  }
  std::cout << "\n";
  if (!keep) {
    std::cout << "  no retention set: committed checkpoints are all kept (set one with "
                 "`ckptfs ckpt keep "
              << run_dir << " K` or pass --keep K)\n";
  }
  if (young_aborted > 0) {
    std::cout << "  " << young_aborted << " aborted checkpoint" << (young_aborted == 1 ? "" : "s")
              << " ended less than " << *grace_s << "s ago, left for now (--grace-s)\n";
  }
  if (young_removing > 0) {
    std::cout << "  " << young_removing << " checkpoint" << (young_removing == 1 ? "" : "s")
              << " whose removal began less than " << *grace_s << "s ago, left to whoever removes "
              << (young_removing == 1 ? "it" : "them") << " (--grace-s)\n";
  }
  if (failed > 0) {
    return Failure(spec, absl::StrCat(failed, " checkpoint", failed == 1 ? "" : "s",
                                      " could not be removed (see above)"));
  }
  return 0;
}

}  // namespace ckptfs::tools
