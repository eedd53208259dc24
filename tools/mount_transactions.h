// Checkpoint transactions as the `ckptfs ckpt` commands see them: through
// the extended attributes of a ckptfs mount (docs/checkpoints.md),
// so they need no metadata-service address and work on any
// node where the file system is mounted.
//
//   write  user.ckptfs.ranks "N"           on DIR: declare DIR a checkpoint
//          user.ckptfs.commit "R"          on DIR: commit rank R (blocks); one
//                                          rank per node at a time (below)
//          user.ckptfs.commit_timeout_s    on DIR or its parent: the barrier
//          user.ckptfs.keep "K"            on a run dir: retention
//          user.ckptfs.latest_name "NAME"  on a run dir: its latest symlink's
//                                          name ("" for none)
//          user.ckptfs.remove "NAME"       on a run dir: remove a checkpoint
//   read   user.ckptfs.commit.R           on DIR: commit rank R (blocks)
//          user.ckptfs.state / .info       on a checkpoint dir
//          user.ckptfs.checkpoints / .latest  on a run dir
//
// Commits are reads: Linux holds a directory's inode lock through a
// setxattr on it, so through one mount only one setxattr commit per
// checkpoint can wait at a time, while any number of getxattr commits can.
//
// The info lines the mount serves are parsed with ParseCheckpointInfo and
// ParseCheckpointList (common/checkpoint_info_text.h).
// Thread-safe: free functions over the file system.
#ifndef CKPTFS_TOOLS_MOUNT_TRANSACTIONS_H_
#define CKPTFS_TOOLS_MOUNT_TRANSACTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint_info_text.h"
#include "common/reserved_xattrs.h"

namespace ckptfs::tools {

// getxattr(2) of the whole value (sized, retried while it grows). On
// failure an errno status (ENODATA: no such attribute) whose message is
// "<path>: <strerror> (<ERRNAME>)".
absl::StatusOr<std::string> ReadXattr(const std::string& path, const char* name);

// setxattr(2); retried on EINTR (every write above is idempotent: a commit
// retried waits for the same outcome). Errors as ReadXattr.
absl::Status WriteXattr(const std::string& path, const char* name, absl::string_view value);

// OK if `path` lies on a FUSE file system (a ckptfs mount, as far as
// statfs can tell); else ENOTSUP "<path> is not on a ckptfs mount" (on a
// plain file system the writes above would just store attributes and
// "succeed"), or the errno of statfs(2).
absl::Status CheckOnCkptfs(const std::string& path);

// Commits rank `rank` of checkpoint `dir` by reading
// user.ckptfs.commit.<rank>; blocks until the barrier ends. A read
// interrupted by a signal (EINTR) is made again: the rank's arrival stays
// recorded, and the retry waits for the same outcome. Errors as ReadXattr.
absl::Status CommitRank(const std::string& dir, uint64_t rank);

// "Connection timed out (ETIMEDOUT)".
std::string ErrnoText(int err);

// "12s", "5m", "3h", "2d" for a span in milliseconds (negative: "0s").
std::string FormatAge(int64_t ms);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_MOUNT_TRANSACTIONS_H_
