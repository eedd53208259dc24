// The state directory of a local cluster and its cluster.state file.
//
// Layout under DIR (all created by `ckptfs up`, reused by the next `up`):
//   DIR/meta/            the metadata service's data directory
//   DIR/storage-<i>/     storage server i's data directory (its identity)
//   DIR/logs/<role>.log  each daemon's stdout and stderr
//   DIR/cluster.state    key=value text: what is running (see ClusterState)
//   DIR/credential       the cluster's client credential (mode 0600, made
//                        once by the first `up`; common/credential.h): the
//                        one mounts on every node hold
//   DIR/server-credential  the cluster's server credential (the same): the
//                        one storage servers and the repairer hold
//   DIR/.lock            flock()ed by up/down so two never overlap
// cluster.state is rewritten atomically (temp file + rename) after every
// daemon `up` starts, so a `down` can stop even a half-started cluster.
// A StateDir is used from one thread.
#ifndef CKPTFS_TOOLS_STATE_DIR_H_
#define CKPTFS_TOOLS_STATE_DIR_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"
#include "tools/process.h"

namespace ckptfs::tools {

// One daemon `up` started.
struct DaemonRecord {
  std::string role;      // "meta", "storage-<i>", "repair" or "fuse"
  std::string address;   // host:port it serves; the mountpoint for "fuse"
  std::string data_dir;  // "" for "fuse"
  std::string log_path;
  ProcessRecord process;
  // host:port of its Prometheus metrics endpoint (--metrics_listen); "" when
  // it serves none (a daemon built without the flag).
  std::string metrics_address;
};

struct ClusterState {
  std::string meta_address;           // host:port
  std::string mountpoint;             // absolute; "" until the mount is started
  std::vector<DaemonRecord> daemons;  // in start order
};

// key=value lines; '#' starts a comment line; unknown keys are ignored so
// that newer tools can add keys.
std::string SerializeClusterState(const ClusterState& state);
absl::StatusOr<ClusterState> ParseClusterState(absl::string_view text);

class StateDir {
 public:
  // `path` made absolute. With `create`, makes DIR, DIR/meta and DIR/logs.
  static absl::StatusOr<StateDir> Open(const std::string& path, bool create);

  StateDir(StateDir&&) = default;
  StateDir& operator=(StateDir&&) = default;

  const std::string& path() const { return path_; }
  std::string MetaDir() const { return path_ + "/meta"; }
  std::string StorageDir(int index) const;
  std::string LogPath(absl::string_view role) const;
  std::string StateFile() const { return path_ + "/cluster.state"; }
  std::string CredentialFile() const { return path_ + "/credential"; }
  std::string ServerCredentialFile() const { return path_ + "/server-credential"; }

  // Takes DIR/.lock (non-blocking) for the lifetime of this object;
  // FailedPrecondition when another `ckptfs up/down` holds it.
  absl::Status Lock();

  // The recorded state, or nullopt when there is no cluster.state.
  absl::StatusOr<std::optional<ClusterState>> Load() const;
  absl::Status Save(const ClusterState& state) const;
  // Removes cluster.state; OK if it is already gone.
  absl::Status Remove() const;

 private:
  explicit StateDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
  UniqueFd lock_fd_;
};

// `path` as an absolute, lexically normal path (symlinks resolved where the
// path exists).
std::string AbsolutePath(const std::string& path);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_STATE_DIR_H_
