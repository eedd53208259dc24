// Mount: a live ckptfs FUSE mount — the libfuse session, the kernel mount
// and the Filesystem (with its Client) that serves it.
//
// Ownership: a Mount owns its Filesystem; destroying the Mount unmounts
// (when still mounted), tears down the session, closes every file the kernel
// left open, and only then destroys the Client.
//
// Thread-safety: Create, Run and the destructor are called from one thread
// (main). Run starts libfuse's worker threads, which call the Filesystem.
#ifndef CKPTFS_FUSE_MOUNT_H_
#define CKPTFS_FUSE_MOUNT_H_

#include <fuse_lowlevel.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuse/filesystem.h"

namespace ckptfs::fuse {

struct MountOptions {
  std::string mountpoint;
  // FUSE worker threads kept alive when idle (started as requests come).
  int threads = 16;
  // The most worker threads, and so requests served, at once (at least
  // `threads`). A checkpoint commit holds its worker until the barrier
  // ends, so this must leave room for every rank of the node waiting in
  // commit plus the rest of the traffic: libfuse's default of 10 would let
  // a handful of waiting ranks stall the whole mount.
  int max_threads = 512;
  // Extra mount options, comma-separated (e.g. "allow_other"), appended to
  // the fixed ones: default_permissions,fsname=ckptfs,subtype=ckptfs, and
  // allow_other when mounted by root.
  std::string extra_options;
  // libfuse's own trace of every request, on stderr.
  bool fuse_debug = false;
  // Kernel readahead for this mount, in KiB (0 keeps the kernel's 128).
  // The FUSE protocol cannot raise it past the default at INIT; the mount's
  // bdi can (/sys/class/bdi/MAJ:MIN/read_ahead_kb, root only), and larger
  // windows mean fewer, max_write-sized reads for sequential loads and mmap.
  int read_ahead_kb = 4096;
};

// The canonical absolute path of `path` when it exists, is a directory and
// is not a mount point already. Otherwise an error that says which (ENOENT,
// ENOTDIR, EBUSY; ENOTCONN for the leftover of a crashed FUSE daemon, with
// the command that clears it). Mounts use the canonical path: a daemon
// changes its directory to "/", and the unmount must still find it.
absl::StatusOr<std::string> CheckMountpoint(absl::string_view path);

// The worker-thread cap Run uses for `options`: max_threads, raised to
// threads if below it.
unsigned MaxWorkerThreads(const MountOptions& options);

// Blocks SIGTERM, SIGINT, SIGHUP and SIGQUIT in the calling thread and so in
// every thread it starts afterwards. Call it in main before anything starts
// threads (the Client does): then only the thread in Mount::Run receives
// them and the session loop sees them at once.
void BlockTerminationSignals();

class Mount {
 public:
  // Checks the mountpoint (see CheckMountpoint; the Mount then uses its
  // canonical path), creates the session over `fs`, installs
  // libfuse's signal handlers (SIGTERM, SIGINT, SIGHUP end the session) and
  // mounts. On error nothing stays mounted.
  static absl::StatusOr<std::unique_ptr<Mount>> Create(std::unique_ptr<Filesystem> fs,
                                                       const MountOptions& options);
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;
  ~Mount();

  // Serves requests on up to `options.max_threads` worker threads (keeping
  // `options.threads` when idle) until the file system is unmounted
  // (fusermount3 -u) or a termination signal arrives. Unblocks the
  // termination signals in the calling thread.
  absl::Status Run();

 private:
  Mount(std::unique_ptr<Filesystem> fs, const MountOptions& options);

  std::unique_ptr<Filesystem> fs_;
  const MountOptions options_;
  struct fuse_session* session_ = nullptr;
  bool signal_handlers_ = false;
  bool mounted_ = false;
};

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_MOUNT_H_
