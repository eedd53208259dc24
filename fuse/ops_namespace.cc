// Namespace operations: lookup, forget, getattr, setattr, mkdir, rmdir,
// unlink, rename, symlink, readlink, link, mknod, statfs.
//
// Each maps onto one libckptfs Client call; the metadata service validates
// names and enforces the namespace rules, the kernel enforces permission
// bits (default_permissions). See ops.h for the Do*/wrapper shape.
#include <fcntl.h>
#include <linux/fs.h>  // RENAME_NOREPLACE, RENAME_EXCHANGE
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "fuse/attr.h"
#include "fuse/filesystem.h"
#include "fuse/ops.h"
#include "fuse/reply.h"

namespace ckptfs::fuse {
namespace {

void ReplyEntry(fuse_req_t req, const absl::StatusOr<meta::Attr>& attr, absl::string_view op,
                uint64_t ino) {
  if (!attr.ok()) return ReplyError(req, attr.status(), op, ino);
  fuse_entry_param entry = MakeEntry(FsOf(req), *attr);
  fuse_reply_entry(req, &entry);
}

void ReplyAttr(fuse_req_t req, const absl::StatusOr<meta::Attr>& attr, absl::string_view op,
               uint64_t ino) {
  if (!attr.ok()) return ReplyError(req, attr.status(), op, ino);
  struct stat st = AttrToStat(*attr);
  fuse_reply_attr(req, &st, FsOf(req).AttrTimeoutFor(*attr));
}

void ReplyStatus(fuse_req_t req, const absl::Status& status, absl::string_view op, uint64_t ino) {
  if (!status.ok()) return ReplyError(req, status, op, ino);
  fuse_reply_err(req, 0);
}

// --- lookup / forget / getattr ---------------------------------------------

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  ReplyEntry(req, FsOf(req).client().Lookup(parent, name), "lookup", parent);
}

// FUSE inode numbers are ckptfs inode numbers; there is no table to trim.
void Forget(fuse_req_t req, fuse_ino_t /*ino*/, uint64_t /*nlookup*/) { fuse_reply_none(req); }

void ForgetMulti(fuse_req_t req, size_t /*count*/, struct fuse_forget_data* /*forgets*/) {
  fuse_reply_none(req);
}

// A removed inode answers ESTALE (CurrentAttr), so stat() walks the path
// again and finds whatever now has the name.
void GetAttr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* /*fi*/) {
  ReplyAttr(req, CurrentAttr(FsOf(req), ino), "getattr", ino);
}

// --- setattr ---------------------------------------------------------------

absl::StatusOr<meta::Attr> DoSetAttr(Filesystem& fs, fuse_ino_t ino, const struct stat& attr,
                                     int to_set, struct fuse_file_info* fi) {
  meta::SetAttrRequest request = MakeSetAttrRequest(ino, attr, to_set);
  if (request.valid() == meta::SET_ATTR_NONE) return fs.client().GetAttr(ino);
  // ftruncate (or O_TRUNC without atomic_o_trunc) on an open handle: let the
  // chunk writes already buffered for this handle land first, so none of
  // them can arrive after the trim and bring cut data back.
  if ((request.valid() & meta::SET_SIZE) && fi != nullptr) {
    client::File& file = Filesystem::FileOf(fi->fh);
    if ((file.flags() & O_ACCMODE) != O_RDONLY) {
      absl::Status flushed = file.Flush();
      if (!flushed.ok()) return flushed;
    }
  }
  return fs.client().SetAttr(request);
}

void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
             struct fuse_file_info* fi) {
  Filesystem& fs = FsOf(req);
  absl::StatusOr<meta::Attr> set = DoSetAttr(fs, ino, *attr, to_set, fi);
  if (!set.ok()) set = StaleIfInodeGone(fs, ino, set.status());
  ReplyAttr(req, set, "setattr", ino);
}

// --- directories, links ------------------------------------------------------

void Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  ReplyEntry(req, FsOf(req).client().Mkdir(parent, name, mode & 07777, ctx->uid, ctx->gid), "mkdir",
             parent);
}

void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  ReplyStatus(req, FsOf(req).client().Rmdir(parent, name), "rmdir", parent);
}

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  ReplyStatus(req, FsOf(req).client().Unlink(parent, name), "unlink", parent);
}

absl::Status DoRename(Filesystem& fs, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
                      const char* new_name, unsigned int flags) {
  if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
    return ErrnoStatus(EINVAL, absl::StrCat("rename flags 0x", absl::Hex(flags)));
  }
  // An atomic swap of two names needs a service operation ckptfs lacks.
  if (flags & RENAME_EXCHANGE) return ErrnoStatus(EINVAL, "RENAME_EXCHANGE is not supported");
  return fs.client().Rename(parent, name, new_parent, new_name,
                            /*no_replace=*/(flags & RENAME_NOREPLACE) != 0);
}

void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
            const char* new_name, unsigned int flags) {
  ReplyStatus(req, DoRename(FsOf(req), parent, name, new_parent, new_name, flags), "rename",
              parent);
}

void Symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  ReplyEntry(req, FsOf(req).client().Symlink(parent, name, target, ctx->uid, ctx->gid), "symlink",
             parent);
}

void ReadLink(fuse_req_t req, fuse_ino_t ino) {
  absl::StatusOr<std::string> target = FsOf(req).client().ReadLink(ino);
  if (!target.ok()) return ReplyError(req, target.status(), "readlink", ino);
  fuse_reply_readlink(req, target->c_str());
}

void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  ReplyEntry(req, FsOf(req).client().Link(ino, new_parent, new_name), "link", ino);
}

// mknod of a regular file is a create that closes at once; FIFOs, sockets
// and device nodes are special files the service keeps (mode, owner, rdev)
// and the kernel serves. The kernel has already refused device nodes to
// callers without CAP_MKNOD.
absl::StatusOr<meta::Attr> DoMknod(Filesystem& fs, const fuse_ctx& ctx, fuse_ino_t parent,
                                   const char* name, mode_t mode, dev_t rdev) {
  if (!S_ISREG(mode)) {
    return fs.client().Mknod(parent, name, mode & (S_IFMT | 07777), rdev, ctx.uid, ctx.gid);
  }
  absl::StatusOr<client::Client::Created> created =
      fs.client().Create(parent, name, mode & 07777, ctx.uid, ctx.gid, O_CREAT | O_EXCL | O_WRONLY);
  if (!created.ok()) return created.status();
  absl::Status closed = created->file->Close();
  if (!closed.ok()) return closed;
  return created->attr;
}

void Mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  ReplyEntry(req, DoMknod(FsOf(req), *fuse_req_ctx(req), parent, name, mode, rdev), "mknod",
             parent);
}

// --- statfs ------------------------------------------------------------------

void StatFs(fuse_req_t req, fuse_ino_t ino) {
  absl::StatusOr<meta::StatFsReply> reply = FsOf(req).client().StatFs();
  if (!reply.ok()) return ReplyError(req, reply.status(), "statfs", ino);
  struct statvfs st = StatFsToStatvfs(*reply);
  fuse_reply_statfs(req, &st);
}

}  // namespace

void AddNamespaceOps(fuse_lowlevel_ops* ops) {
  ops->lookup = Lookup;
  ops->forget = Forget;
  ops->forget_multi = ForgetMulti;
  ops->getattr = GetAttr;
  ops->setattr = SetAttr;
  ops->mkdir = Mkdir;
  ops->rmdir = Rmdir;
  ops->unlink = Unlink;
  ops->rename = Rename;
  ops->symlink = Symlink;
  ops->readlink = ReadLink;
  ops->link = Link;
  ops->mknod = Mknod;
  ops->statfs = StatFs;
}

}  // namespace ckptfs::fuse
