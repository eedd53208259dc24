// Extended-attribute operations: setxattr, getxattr, listxattr,
// removexattr. Values live in the metadata service (which also reads
// user.ckptfs.* attributes such as the per-directory chunk size).
//
// getxattr and listxattr follow the two-step protocol of the syscalls: a
// size-0 request asks only for the length; a buffer too small gets ERANGE.
#include <cerrno>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "fuse/filesystem.h"
#include "fuse/ops.h"
#include "fuse/reply.h"
#include "fuse/xattr_names.h"

namespace ckptfs::fuse {
namespace {

// Replies to a getxattr/listxattr of a `size`-byte buffer with `value`.
void ReplyXattrValue(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
  } else if (value.size() > size) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, value.data(), value.size());
  }
}

absl::Status DoSetXattr(Filesystem& fs, fuse_ino_t ino, const char* name, const char* value,
                        size_t size, int flags) {
  if (!IsStoredXattrName(name)) {
    return ErrnoStatus(EOPNOTSUPP, absl::StrCat("xattr namespace of ", name, " not supported"));
  }
  return fs.client().SetXattr(ino, name, absl::string_view(value, size), flags);
}

void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags) {
  absl::Status status = DoSetXattr(FsOf(req), ino, name, value, size, flags);
  if (!status.ok()) return ReplyError(req, status, "setxattr", ino);
  fuse_reply_err(req, 0);
}

absl::StatusOr<std::string> DoGetXattr(Filesystem& fs, fuse_ino_t ino, const char* name) {
  if (!IsStoredXattrName(name)) return ErrnoStatus(ENODATA, name);
  return fs.client().GetXattr(ino, name);
}

void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  absl::StatusOr<std::string> value = DoGetXattr(FsOf(req), ino, name);
  if (!value.ok()) return ReplyError(req, value.status(), "getxattr", ino);
  ReplyXattrValue(req, *value, size);
}

absl::StatusOr<std::string> DoListXattr(Filesystem& fs, fuse_ino_t ino) {
  absl::StatusOr<std::vector<std::string>> names = fs.client().ListXattr(ino);
  if (!names.ok()) return names.status();
  return PackXattrNames(*names);
}

void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  absl::StatusOr<std::string> packed = DoListXattr(FsOf(req), ino);
  if (!packed.ok()) return ReplyError(req, packed.status(), "listxattr", ino);
  ReplyXattrValue(req, *packed, size);
}

absl::Status DoRemoveXattr(Filesystem& fs, fuse_ino_t ino, const char* name) {
  if (!IsStoredXattrName(name)) return ErrnoStatus(ENODATA, name);
  return fs.client().RemoveXattr(ino, name);
}

void RemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  absl::Status status = DoRemoveXattr(FsOf(req), ino, name);
  if (!status.ok()) return ReplyError(req, status, "removexattr", ino);
  fuse_reply_err(req, 0);
}

}  // namespace

void AddXattrOps(fuse_lowlevel_ops* ops) {
  ops->setxattr = SetXattr;
  ops->getxattr = GetXattr;
  ops->listxattr = ListXattr;
  ops->removexattr = RemoveXattr;
}

}  // namespace ckptfs::fuse
