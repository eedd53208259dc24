// The mount(8) helper's contract, as pure functions: what `mount -t
// fuse.ckptfs META_ADDR DIR -o OPTIONS` (or an /etc/fstab line) hands to
// /sbin/mount.fuse.ckptfs, and the ckptfs-fuse command line it becomes.
//
// mount(8) runs the helper as
//   mount.fuse.ckptfs SOURCE MOUNTPOINT [-sfnv] [-o OPTIONS] [-t TYPE]
// OPTIONS is one comma-separated list mixing
//   - ckptfs options, which become ckptfs-fuse flags: `threads=32` ->
//     `--threads=32`, a bare boolean `splice` -> `--splice=true`,
//     `credential_file=/etc/ckptfs/credential` -> `--credential_file=...`;
//   - `config=FILE` (a flag file, see deploy/config/fuse.conf) and `log=FILE`
//     (the daemon's log);
//   - fstab/mount(8)-only options, which are dropped (defaults, auto, noauto,
//     user, users, nouser, owner, group, rw, _netdev, nofail, comment=...,
//     x-...), and options ckptfs always sets (default_permissions, fsname,
//     subtype);
//   - everything else (ro, allow_other, nosuid, nodev, noatime, max_read=...),
//     passed to the kernel mount through --fuse_options, which libfuse
//     checks.
// Flags from the config file come first on the command line, so options
// given at mount time override them.
//
// Thread-compatible; no I/O except ResolveConfig's existence check.
#ifndef CKPTFS_FUSE_MOUNT_HELPER_MOUNT_OPTIONS_H_
#define CKPTFS_FUSE_MOUNT_HELPER_MOUNT_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ckptfs::tools {

// What mount(8) asked for.
struct MountRequest {
  std::string source;                // the metadata service, HOST:PORT
  std::string mountpoint;            // as given
  std::vector<std::string> options;  // split at commas, empty items dropped
  bool fake = false;                 // -f: do everything but the mount (print the command)
  bool verbose = false;              // -v: print the command before running it
};

// Parses the helper's arguments (argv[1..]). InvalidArgument, with a message
// naming the problem, for a missing source or mountpoint, a stray argument,
// an unknown switch, or a source that is not HOST:PORT.
absl::StatusOr<MountRequest> ParseMountArgs(const std::vector<std::string>& args);

// The ckptfs-fuse invocation a request becomes (without the program path).
struct FuseInvocation {
  std::vector<std::string> args;  // --flagfile first (if any), then the rest
  std::string log_file;           // the daemon's log: log=FILE, else DefaultLogFile
};

// Translates `request`. `default_config` is used as `--flagfile` when the
// options give no `config=` (empty: none). InvalidArgument for an option
// with a missing or stray value (`threads`, `log=`, `splice=maybe`).
absl::StatusOr<FuseInvocation> TranslateMount(const MountRequest& request,
                                              const std::string& default_config);

// The default log file of a mount: /var/log/ckptfs/mount-<escaped>.log where
// <escaped> is the mountpoint with slashes turned into dashes
// ("/checkpoints" -> "checkpoints", "/mnt/ckpt" -> "mnt-ckpt", "/" -> "root").
std::string DefaultLogFile(const std::string& mountpoint);

}  // namespace ckptfs::tools

#endif  // CKPTFS_FUSE_MOUNT_HELPER_MOUNT_OPTIONS_H_
