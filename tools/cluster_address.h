// Which metadata service a `ckptfs` command talks to: --meta ADDR, the
// cluster recorded in --state-dir DIR, or — for commands given a path on a
// mount — the service the ckptfs-fuse daemon serving that mount uses
// (read from the daemon's command line, --meta=ADDR). And the credential to
// present to it, found the same way.
// Thread-safe: free functions over the file system.
#ifndef CKPTFS_TOOLS_CLUSTER_ADDRESS_H_
#define CKPTFS_TOOLS_CLUSTER_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "tools/flags.h"

namespace ckptfs::tools {

// The flags every command that reaches the service by address declares.
FlagSpec MetaFlag();
FlagSpec StateDirFlag();
FlagSpec CredentialFileFlag();

// The address from --meta or --state-dir (at most one may be given; both:
// InvalidArgument). When neither is given: the service of the ckptfs mount
// holding `path` if `path` is not empty, else InvalidArgument saying what to
// pass. Errors name what was looked at and what to do.
absl::StatusOr<std::string> ResolveMetaAddress(const ParsedFlags& flags, const std::string& path);

// The cluster credential the command presents (common/credential.h): the
// file --credential-file names; else $CKPTFS_CREDENTIAL_FILE; else
// DIR/credential of --state-dir when it
// exists; else, for a `path` on a mount, the --credential_file of the
// ckptfs-fuse daemon serving it; else "" (none). A file that cannot be
// read, or is open to other users, fails with the reason and the flag to
// use.
absl::StatusOr<std::string> ResolveCredential(const ParsedFlags& flags, const std::string& path);

// The same for a command that administers the cluster (`ckptfs repair`):
// with --state-dir, DIR/server-credential when it exists.
absl::StatusOr<std::string> ResolveServerCredential(const ParsedFlags& flags);

// The --meta address of the ckptfs-fuse process serving the FUSE mount that
// holds `path`. NotFound when `path` is not on a FUSE mount or no process
// of this machine (that we may inspect) serves it.
absl::StatusOr<std::string> MetaAddressOfMount(const std::string& path);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_CLUSTER_ADDRESS_H_
