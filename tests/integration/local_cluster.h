// LocalCluster: a real ckptfs cluster for integration tests — one metadata
// server, N storage servers and any number of FUSE mounts, each its own
// process on 127.0.0.1, all state in a fresh temporary directory.
//
// The cluster owns every process and mount it starts; the destructor
// unmounts every mount and kills every process, even when a test fails
// (and children die with the test binary via PR_SET_PDEATHSIG). Ports are
// picked free at start. Executables come from CKPTFS_BIN_DIR (the build's
// bin/, set by CMake).
//
// Authentication is on by default, as `ckptfs up` has it: the cluster makes
// a credential (root()/credential, mode 0600) and gives it to every daemon
// and mount (--credential_file), and a server credential
// (root()/server-credential) to the daemons (--server_credential_file),
// and exports the first one's path as
// CKPTFS_CREDENTIAL_FILE (restored when the cluster goes) so that the
// test's own Clients (ClientOptions' default) and the `ckptfs` tools it runs
// present it too. Raw gRPC stubs add credential() to their calls
// (AttachCredential, common/credential.h).
//
// Thread-safety: not thread-safe; owned by one test.
#ifndef CKPTFS_TESTS_INTEGRATION_LOCAL_CLUSTER_H_
#define CKPTFS_TESTS_INTEGRATION_LOCAL_CLUSTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/integration/child_process.h"

namespace ckptfs::testing {

// The directory holding ckptfs-meta, ckptfs-storage, ckptfs-fuse, ckptfs.
std::string BinDir();

// A free TCP port on 127.0.0.1 (bound then released; good enough for tests),
// below the kernel's ephemeral range so that no outgoing connection takes
// it before its daemon binds it, never one this process was handed before.
absl::StatusOr<uint16_t> PickFreePort();

// A new empty directory under $TMPDIR (or /tmp); removed by RemoveTree.
absl::StatusOr<std::string> MakeTempDir(const std::string& prefix);
void RemoveTree(const std::string& path);

// True if `path` is a mountpoint of type fuse.ckptfs in /proc/self/mountinfo.
bool IsCkptfsMount(const std::string& path);

// The flag that makes a daemon serve Prometheus metrics on 127.0.0.1:`port`
// (common/metrics): pass it in LocalClusterOptions::meta_flags or a Mount's
// extra_flags; a port from PickFreePort.
inline std::string MetricsListenFlag(uint16_t port) {
  return "--metrics_listen=127.0.0.1:" + std::to_string(port);
}

struct LocalClusterOptions {
  int storage_servers = 4;
  // Extra flags for every ckptfs-meta start, e.g. {"--orphan_grace_s=1"}.
  std::vector<std::string> meta_flags;
  // Extra flags for every ckptfs-storage start, e.g. {"--scrub_bytes_per_s=0"}.
  std::vector<std::string> storage_flags;
  // Create a credential and require it everywhere (see above); false: every
  // daemon serves anyone.
  bool credential = true;
  // Mounts read chunks of these (local) servers from their files
  // (client/local_chunk_transport.h). Off by default, so that the suites
  // cover the TCP read path every remote node takes; a mount's own
  // --local_reads flag overrides it.
  bool local_reads = false;
  // The same for writes (--local_writes).
  bool local_writes = false;
  // When > 0, the storage servers' data directories lie on a tmpfs of this
  // many MiB that is the cluster's own (root()/disk, mounted by Start, which
  // then needs root, and unmounted by the destructor): the space they
  // report, and so statfs of a mount, changes only with what this cluster
  // stores. 0: they lie on the temporary directory's disk, shared with
  // whatever else runs on the host.
  int storage_disk_mib = 0;
};

class LocalCluster {
 public:
  // Starts the metadata server and the storage servers and waits until every
  // storage server is registered and alive.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(LocalClusterOptions options = {});

  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;
  ~LocalCluster();

  const std::string& root() const { return root_; }
  std::string meta_address() const;
  // The credential file and its secret; "" when options.credential is off.
  const std::string& credential_file() const { return credential_file_; }
  const std::string& credential() const { return credential_; }
  // The server credential (root()/server-credential) the metadata service
  // and the storage servers get besides; "" likewise.
  const std::string& server_credential_file() const { return server_credential_file_; }
  const std::string& server_credential() const { return server_credential_; }
  std::string storage_address(int i) const;
  int storage_servers() const { return options_.storage_servers; }
  // The data directory of storage server i (its chunks are files
  // chunks/<ino>/<index> under it).
  std::string storage_dir(int i) const;
  // Process ids of the daemons as last started (for tracing them); 0 if
  // never started.
  pid_t meta_pid() const;
  pid_t storage_pid(int i) const;

  // Mounts the cluster at root()/<name> (a ckptfs-fuse in the foreground,
  // owned here) and waits until the mount is live. Returns the mountpoint.
  // The mount gets the cluster's credential unless `extra_flags` has a
  // --credential_file of its own ("--credential_file=" for none).
  absl::StatusOr<std::string> Mount(const std::string& name,
                                    std::vector<std::string> extra_flags = {});
  // Unmounts and stops the mount's daemon.
  absl::Status Unmount(const std::string& mountpoint);

  // Sends `signal` to the metadata server and waits for it to exit.
  absl::Status StopMeta(int signal);
  absl::Status StartMeta();  // on the same port and data directory
  absl::Status StopStorage(int i, int signal);
  absl::Status StartStorage(int i);
  // Waits until `n` storage servers are alive in ListServers.
  absl::Status WaitServersAlive(int n, absl::Duration timeout = absl::Seconds(30));

  // Logs of every process, for failure messages.
  std::string DescribeLogs() const;

 private:
  explicit LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {}

  LocalClusterOptions options_;
  std::string root_;
  std::string credential_file_;
  std::string credential_;
  std::string server_credential_file_;
  std::string server_credential_;
  // CKPTFS_CREDENTIAL_FILE before Start set it (restored by the destructor).
  std::optional<std::string> previous_env_;
  bool env_set_ = false;
  uint16_t meta_port_ = 0;
  std::vector<uint16_t> storage_ports_;
  std::unique_ptr<ChildProcess> meta_;
  std::vector<std::unique_ptr<ChildProcess>> storage_;
  std::map<std::string, std::unique_ptr<ChildProcess>> mounts_;  // by mountpoint
  std::string storage_disk_;  // the tmpfs of options_.storage_disk_mib, once mounted
};

}  // namespace ckptfs::testing

#endif  // CKPTFS_TESTS_INTEGRATION_LOCAL_CLUSTER_H_
