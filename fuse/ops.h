// The FUSE low-level operations of ckptfs, split by area. Each Add*Ops
// fills its area's slots of the operation table; Filesystem::Ops() calls
// them all once.
//
// Every operation has the same shape: a Do* helper that does the work and
// returns an absl::Status or StatusOr, and a thin wrapper that makes exactly
// one fuse_reply_* with its result (errors through ReplyError, reply.h).
// The operations run on libfuse's worker threads, concurrently.
#ifndef CKPTFS_FUSE_OPS_H_
#define CKPTFS_FUSE_OPS_H_

#include <fuse_lowlevel.h>

namespace ckptfs::fuse {

// lookup, forget, getattr, setattr, mkdir, rmdir, unlink, rename, symlink,
// readlink, link, mknod, statfs (ops_namespace.cc).
void AddNamespaceOps(fuse_lowlevel_ops* ops);
// create, open, read, write, flush, release, fsync (ops_file.cc).
void AddFileOps(fuse_lowlevel_ops* ops);
// opendir, readdir, releasedir, fsyncdir (ops_dir.cc).
void AddDirOps(fuse_lowlevel_ops* ops);
// setxattr, getxattr, listxattr, removexattr (ops_xattr.cc).
void AddXattrOps(fuse_lowlevel_ops* ops);

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_OPS_H_
