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
//                                   every entry in it (read, write and
//                                   search permission on each of its
//                                   directories,
//                                   and ownership of the entries of a sticky
//                                   one).
//
// Root may do all of it. A refusal is EACCES (EPERM where a sticky
// directory's rule refuses, as for unlink) with a message naming the
// caller, the operation and the permission it lacks; nothing changes.
// The removal a check allowed is of the checkpoint checked (its inode), so
// a rename between the two steps cannot make it take another; a chmod
// between them decides nothing that the caller could not have done in the
// other order.
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

// OK when `caller` may make a commit as a read (getxattr `name`, a
// user.ckptfs.commit.R) on inode `ino`; the error to answer otherwise (a
// failure to read the directory's attributes included).
absl::Status CheckCommitAsRead(client::Client& client, const Caller& caller, uint64_t ino,
                               absl::string_view name);

// Checks the removal that setting user.ckptfs.remove of run directory
// `run_dir` to `value` asks for and, when `caller` may, removes the
// checkpoint it checked (ENOENT when the name is not there, EINVAL for a
// bad value, as the removal itself would answer).
absl::Status RemoveCheckedCheckpoint(client::Client& client, const Caller& caller, uint64_t run_dir,
                                     absl::string_view value);

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_CHECKPOINT_ACCESS_H_
