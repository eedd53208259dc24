// Target: one filesystem a storm runs against — a mounted directory whose
// ranks are processes, or ckptfs through libckptfs whose ranks are threads —
// with what the runner learned about it (filesystem type, whether the
// commit barrier runs there, which processes serve it).
//
// Thread-safety: a Target is used by the runner's thread; its executor runs
// ranks as rank_executor.h says.
#ifndef CKPTFS_BENCH_TARGET_H_
#define CKPTFS_BENCH_TARGET_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/rank_executor.h"
#include "tools/mounts.h"

namespace ckptfs::client {
class Client;
}

namespace ckptfs::bench {

struct Target {
  Target();
  ~Target();
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  std::string label;  // "A" or "B"
  std::string path;   // as given (--dir / --baseline)
  std::string root;   // resolved: realpath, or the path inside ckptfs
  bool native = false;
  std::string meta_address;  // native
  std::string fs_type;       // "ext4", "fuse.ckptfs", "ckptfs (libckptfs)"
  std::string mount_point;   // of a directory target
  bool is_ckptfs = false;

  // Commit barrier: wanted (phase selected, mode allows), then confirmed or
  // turned off at the first declare; `commit_note` says why.
  bool commit = false;
  bool commit_confirmed = false;
  std::string commit_note;

  // Processes whose CPU time counts as the target's (names or pids), and
  // how the report names them.
  std::vector<std::string> target_procs;
  std::string target_procs_label;

  std::unique_ptr<client::Client> client;  // native; outlives executor
  std::unique_ptr<RankExecutor> executor;
};

// The mount holding `path` (an absolute, resolved path): the one whose
// mount point is the longest prefix of it, the topmost of those stacked
// there. From /proc/self/mountinfo, or from `mountinfo` text (for tests).
std::optional<tools::MountEntry> MountOf(const std::string& path);
std::optional<tools::MountEntry> MountIn(absl::string_view mountinfo, const std::string& path);

// Checks that `path` is an existing, writable directory and sets up a
// process-rank target there. Errors say what is wrong with the directory
// ("does not exist", "is not a directory", "is not writable").
absl::StatusOr<std::unique_ptr<Target>> OpenDirTarget(const std::string& label,
                                                      const std::string& path);

// Connects to ckptfs at `meta_address`; ranks are tasks on `threads`
// threads under `path` inside ckptfs.
absl::StatusOr<std::unique_ptr<Target>> OpenNativeTarget(const std::string& label,
                                                         const std::string& meta_address,
                                                         const std::string& path, int threads);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_TARGET_H_
