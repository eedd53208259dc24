// CheckpointAccess: holds the checkpoint operations made through the mount
// to what the equivalent file operations would need of the caller.
//
// The kernel checks the permission bits (default_permissions) before every
// file operation, and before a setxattr it checks write permission on the
// inode: declaring (user.ckptfs.ranks), committing by setxattr
// (user.ckptfs.commit), changing user.ckptfs.keep and naming a checkpoint
// in user.ckptfs.remove all need write permission on the directory they
// are set on. Two checkpoint operations it cannot judge, and the mount
// checks them here:
//
//   getxattr user.ckptfs.commit.R   a commit made as a read (so that many
//                                   local ranks can wait at once): it needs
//                                   write and search permission on the
//                                   checkpoint directory, as a setxattr
//                                   commit does, not only read permission.
//   setxattr user.ckptfs.remove     removes a whole checkpoint, as `rm -r`
//                                   would: the caller must be allowed to
//                                   delete it from the run directory, and
//                                   either own it or be allowed to delete
//                                   every entry in it (write and search
//                                   permission on each of its directories,
//                                   and ownership of the entries of a sticky
//                                   one).
//
// Root may do all of it. A refusal is EACCES (EPERM where a sticky
// directory's rule refuses, as for unlink) with a message naming the
// caller, the operation and the permission it lacks; nothing changes.
// The check and the operation are two steps: a chmod between them decides
// nothing that the caller could not have done in the other order.
//
// Thread-safety: thread-safe (the Client is).
#ifndef CKPTFS_FUSE_CHECKPOINT_ACCESS_H_
#define CKPTFS_FUSE_CHECKPOINT_ACCESS_H_

#include <fuse_lowlevel.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/client.h"
#include "fuse/caller_permissions.h"

namespace ckptfs::fuse {

// The caller of `req`, with its supplementary groups.
Caller CallerOf(fuse_req_t req);

// OK when `caller` may get (`set` false) or set (`set` true, to `value`)
// extended attribute `name` of inode `ino` as far as the checks above go;
// the error to answer otherwise. A checkpoint name to remove that is not
// there passes (the removal then says so); any other failure to read the
// attributes the check needs is returned, so nothing unchecked goes on.
absl::Status CheckCheckpointAccess(client::Client& client, const Caller& caller, uint64_t ino,
                                   absl::string_view name, absl::string_view value, bool set);

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_CHECKPOINT_ACCESS_H_
