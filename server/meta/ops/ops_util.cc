// See ops_util.h.
#include "server/meta/ops/ops_util.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "common/file_type.h"
#include "google/protobuf/stubs/common.h"
#include "server/meta/keys.h"

namespace ckptfs::meta {

absl::Status RequireStorableString(absl::string_view value, absl::string_view what) {
  // The check protobuf's parser applies to proto3 string fields.
  if (!google::protobuf::internal::IsStructurallyValidUTF8(value.data(),
                                                           static_cast<int>(value.size()))) {
    return ErrnoStatus(EINVAL, absl::StrCat(what, " is not valid UTF-8"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNewName(absl::string_view name) {
  if (absl::Status valid = ValidateName(name); !valid.ok()) return valid;
  return RequireStorableString(name, absl::StrCat("name \"", absl::CHexEscape(name), "\""));
}

InodeRecord NewInode(uint64_t ino, FileType type, uint32_t perm, uint32_t uid, uint32_t gid,
                     int64_t now_ns) {
  InodeRecord inode;
  Attr* attr = inode.mutable_attr();
  attr->set_ino(ino);
  attr->set_type(type);
  attr->set_mode(ModeTypeBits(type) | (perm & kPermissionBits));
  attr->set_uid(uid);
  attr->set_gid(gid);
  attr->set_nlink(type == DIRECTORY ? 2 : 1);
  attr->set_atime_ns(now_ns);
  attr->set_mtime_ns(now_ns);
  attr->set_ctime_ns(now_ns);
  return inode;
}

absl::StatusOr<InodeRecord> GetDir(MetaTxn& txn, uint64_t ino) {
  absl::StatusOr<InodeRecord> dir = txn.GetInode(ino);
  if (!dir.ok()) return dir.status();
  if (!IsDir(*dir)) return ErrnoStatus(ENOTDIR, absl::StrCat("inode ", ino, " is not a directory"));
  return dir;
}

absl::Status NameExistsError(absl::string_view name, uint64_t parent) {
  return ErrnoStatus(EEXIST, absl::StrCat("\"", name, "\" already exists in directory ", parent));
}

absl::Status RequireFreeName(MetaTxn& txn, uint64_t parent, absl::string_view name) {
  absl::StatusOr<std::optional<DentryRecord>> dentry = txn.GetDentry(parent, name);
  if (!dentry.ok()) return dentry.status();
  if (dentry->has_value()) return NameExistsError(name, parent);
  return absl::OkStatus();
}

absl::StatusOr<InodeRecord> GetParentDir(MetaTxn& txn, uint64_t ino) {
  absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
  if (!dir.ok() && ErrnoFromStatus(dir.status()) == ENOENT) {
    return ErrnoStatus(ESTALE, absl::StrCat("directory ", ino, " no longer exists"));
  }
  return dir;
}

void TouchDir(InodeRecord& dir, int64_t now_ns) {
  dir.mutable_attr()->set_mtime_ns(now_ns);
  dir.mutable_attr()->set_ctime_ns(now_ns);
}

DentryRecord MakeDentry(const InodeRecord& inode) {
  DentryRecord dentry;
  dentry.set_ino(inode.attr().ino());
  dentry.set_type(inode.attr().type());
  return dentry;
}

bool AddWriter(InodeRecord& inode, uint64_t writer) {
  if (writer == 0) return false;
  for (uint64_t registered : inode.writer_handles()) {
    if (registered == writer) return false;
  }
  inode.add_writer_handles(writer);
  return true;
}

bool RemoveWriter(InodeRecord& inode, uint64_t writer) {
  if (writer == 0) return false;
  auto* writers = inode.mutable_writer_handles();
  auto it = std::find(writers->begin(), writers->end(), writer);
  if (it == writers->end()) return false;
  writers->erase(it);
  return true;
}

absl::Status ReleaseInode(MetaTxn& txn, InodeRecord inode, int64_t now_ns, absl::Duration grace) {
  const uint64_t ino = inode.attr().ino();
  if (!IsDir(inode) && inode.attr().nlink() > 1) {  // another hard link keeps it
    inode.mutable_attr()->set_nlink(inode.attr().nlink() - 1);
    inode.mutable_attr()->set_ctime_ns(now_ns);
    txn.PutInode(inode);
    return absl::OkStatus();
  }
  if (inode.attr().type() != REGULAR) {
    txn.Delete(InodeKey(ino));
    return txn.AddInodeCount(-1);
  }
  // Keep the inode (nlink 0) so handles still open on it can stat it; the
  // reclaimer deletes it with its chunks after the grace period.
  inode.mutable_attr()->set_nlink(0);
  inode.mutable_attr()->set_ctime_ns(now_ns);
  txn.PutInode(inode);
  OrphanRecord orphan;
  *orphan.mutable_layout() = inode.attr().layout();
  orphan.set_size(inode.attr().size());
  orphan.set_reclaim_after_ms(now_ns / 1'000'000 + absl::ToInt64Milliseconds(grace));
  txn.Put(OrphanKey(ino), orphan);
  return absl::OkStatus();
}

}  // namespace ckptfs::meta
