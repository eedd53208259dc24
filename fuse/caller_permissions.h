// CallerPermissions: what the permission bits of an inode let one caller
// of the mount do, as the kernel's own check (default_permissions) decides
// it: root may do anything; otherwise the owner's bits apply to the owner,
// the group's to a member of the inode's group (primary or supplementary),
// the others' to everyone else. Deleting an entry of a directory needs
// write and search permission on the directory and, when the directory is
// sticky, ownership of the entry or of the directory.
//
// The mount uses these for what the kernel cannot check on its own: a
// checkpoint commit made as a getxattr, and the removal of a whole
// checkpoint through one attribute (fuse/checkpoint_access.h).
//
// Thread-safety: pure functions on values.
#ifndef CKPTFS_FUSE_CALLER_PERMISSIONS_H_
#define CKPTFS_FUSE_CALLER_PERMISSIONS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "proto/meta.pb.h"

namespace ckptfs::fuse {

// Who makes a request.
struct Caller {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups

  bool IsRoot() const { return uid == 0; }
  bool InGroup(gid_t g) const;
};

// Access bits of a request, as access(2)'s: R_OK, W_OK, X_OK.
bool MayAccess(const Caller& caller, const meta::Attr& attr, int mask);

// Whether `caller` may delete `entry` (any type) from directory `dir`.
bool MayDeleteEntry(const Caller& caller, const meta::Attr& dir, const meta::Attr& entry);

// "uid U (gid G)" for messages.
std::string DescribeCaller(const Caller& caller);
// "mode 0755, owner uid 0 gid 0" for messages.
std::string DescribeOwnership(const meta::Attr& attr);

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_CALLER_PERMISSIONS_H_
