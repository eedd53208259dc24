// Namespace::Create, Mkdir, Symlink and Mknod: the operations that add a
// name and a new inode. Each is one transaction: the new inode, its dentry, the parent's
// times (and nlink for a directory) and the inode count. The new inode
// inherits its parent's checkpoint; inside an ended checkpoint nothing is
// created (EROFS). A retried exclusive create whose first reply was lost is
// recognised by its writer id and answered as the first attempt was.
#include <sys/stat.h>

#include <cerrno>
#include <optional>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "common/file_type.h"
#include "common/written_chunks.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

// The inode number of the new entry: allocated on the first attempt of the
// transaction and kept across retries, so a conflict never burns numbers.
absl::StatusOr<uint64_t> NewIno(InodeAllocator& inodes, std::optional<uint64_t>& new_ino) {
  if (!new_ino.has_value()) {
    absl::StatusOr<uint64_t> ino = inodes.Allocate();
    if (!ino.ok()) return ino.status();
    new_ino = *ino;
  }
  return *new_ino;
}

// Stages `child` under `name` in `parent`: the inode (in the parent's
// checkpoint, if any), its dentry, the parent's times and the inode count.
// In a set-group-ID directory the child takes the directory's group, and a
// child directory the set-group-ID bit too, as on ext4 (the kernel leaves
// both to the filesystem).
absl::Status LinkNewInode(MetaTxn& txn, uint64_t parent_ino, InodeRecord& parent,
                          absl::string_view name, InodeRecord& child, int64_t now) {
  if (parent.attr().mode() & S_ISGID) {
    child.mutable_attr()->set_gid(parent.attr().gid());
    if (IsDir(child)) child.mutable_attr()->set_mode(child.attr().mode() | S_ISGID);
  }
  child.set_in_checkpoint(CheckpointOf(parent));
  txn.PutInode(child);
  txn.Put(DentryKey(parent_ino, name), MakeDentry(child));
  TouchDir(parent, now);
  txn.PutInode(parent);
  return txn.AddInodeCount(1);
}

}  // namespace

absl::StatusOr<CreateReply> Namespace::Create(const CreateRequest& request) {
  if (absl::Status valid = ValidateNewName(request.name()); !valid.ok()) return valid;
  std::optional<uint64_t> new_ino;  // allocated once, kept across retries
  return RunTxn<CreateReply>(kv_, "create", [&](MetaTxn& txn) -> absl::StatusOr<CreateReply> {
    absl::StatusOr<InodeRecord> parent = GetParentDir(txn, request.parent());
    if (!parent.ok()) return parent.status();
    absl::StatusOr<std::optional<DentryRecord>> dentry =
        txn.GetDentry(request.parent(), request.name());
    if (!dentry.ok()) return dentry.status();
    const int64_t now = clock_->NowNs();
    CreateReply reply;

    if (dentry->has_value()) {
      absl::StatusOr<InodeRecord> existing = txn.GetInode((*dentry)->ino());
      if (!existing.ok()) return existing.status();
      // A writer id is random and the client's own: finding it registered
      // means this is a retry of a create whose reply was lost. An exclusive
      // one created the file then; answering EEXIST would leave that
      // registration with no handle to release it (and the file busy for a
      // checkpoint commit forever).
      const bool retried =
          request.exclusive() && request.writer_handle() != 0 &&
          existing->attr().type() == REGULAR &&
          absl::c_linear_search(existing->writer_handles(), request.writer_handle());
      if (request.exclusive() && !retried) {
        return NameExistsError(request.name(), request.parent());
      }
      if (existing->attr().type() == DIRECTORY) {
        return ErrnoStatus(EISDIR, absl::StrCat("create: \"", request.name(), "\" is a directory"));
      }
      if (existing->attr().type() != REGULAR) {
        return NameExistsError(request.name(), request.parent());
      }
      // Opening an existing file changes it only when truncating or
      // registering a writer; a plain open is allowed anywhere.
      if (request.truncate() || request.writer_handle() != 0) {
        if (absl::Status writable = RequireMutable(txn, *existing, "create"); !writable.ok()) {
          return writable;
        }
      }
      bool changed = AddWriter(*existing, request.writer_handle());
      if (request.truncate()) {
        existing->mutable_attr()->set_size(0);
        existing->mutable_attr()->set_mtime_ns(now);
        existing->mutable_attr()->set_ctime_ns(NextCtime(existing->attr(), now));
        existing->set_damaged(false);
        existing->clear_unsynced();
        ResetWritten(*existing->mutable_written());
        changed = true;
      }
      if (changed) txn.PutInode(*existing);
      *reply.mutable_attr() = existing->attr();
      reply.set_created(retried);
      return reply;
    }

    if (absl::Status writable = RequireMutable(txn, *parent, "create"); !writable.ok()) {
      return writable;
    }
    absl::StatusOr<uint64_t> ino = NewIno(inodes_, new_ino);
    if (!ino.ok()) return ino.status();
    absl::StatusOr<Layout> layout = NewLayout(*parent, *ino);
    if (!layout.ok()) return layout.status();
    InodeRecord inode = NewInode(*ino, REGULAR, request.mode(), request.uid(), request.gid(), now);
    *inode.mutable_attr()->mutable_layout() = *std::move(layout);
    ResetWritten(*inode.mutable_written());
    AddWriter(inode, request.writer_handle());
    if (absl::Status linked =
            LinkNewInode(txn, request.parent(), *parent, request.name(), inode, now);
        !linked.ok()) {
      return linked;
    }
    *reply.mutable_attr() = inode.attr();
    reply.set_created(true);
    return reply;
  });
}

absl::StatusOr<Attr> Namespace::Mkdir(const MkdirRequest& request) {
  if (absl::Status valid = ValidateNewName(request.name()); !valid.ok()) return valid;
  std::optional<uint64_t> new_ino;
  return RunTxn<Attr>(kv_, "mkdir", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    absl::StatusOr<InodeRecord> parent = GetParentDir(txn, request.parent());
    if (!parent.ok()) return parent.status();
    if (absl::Status writable = RequireMutable(txn, *parent, "mkdir"); !writable.ok()) {
      return writable;
    }
    if (absl::Status free = RequireFreeName(txn, request.parent(), request.name()); !free.ok()) {
      return free;
    }
    absl::StatusOr<uint64_t> ino = NewIno(inodes_, new_ino);
    if (!ino.ok()) return ino.status();
    const int64_t now = clock_->NowNs();
    InodeRecord dir = NewInode(*ino, DIRECTORY, request.mode(), request.uid(), request.gid(), now);
    dir.set_parent(request.parent());
    // Layout inheritance: a new directory copies its parent's chunk size
    // replica count and erasure code.
    for (const char* name : {kChunkSizeXattr, kReplicasXattr, kErasureCodeXattr}) {
      auto setting = parent->xattrs().find(std::string(name));
      if (setting != parent->xattrs().end()) {
        (*dir.mutable_xattrs())[setting->first] = setting->second;
      }
    }
    parent->mutable_attr()->set_nlink(parent->attr().nlink() + 1);  // the new ".."
    if (absl::Status linked =
            LinkNewInode(txn, request.parent(), *parent, request.name(), dir, now);
        !linked.ok()) {
      return linked;
    }
    return dir.attr();
  });
}

absl::StatusOr<Attr> Namespace::Symlink(const SymlinkRequest& request) {
  if (absl::Status valid = ValidateNewName(request.name()); !valid.ok()) return valid;
  if (request.target().empty()) return ErrnoStatus(ENOENT, "symlink: empty target");
  if (request.target().size() > kMaxSymlinkTarget) {
    return ErrnoStatus(ENAMETOOLONG, absl::StrCat("symlink: target of ", request.target().size(),
                                                  " bytes is longer than ", kMaxSymlinkTarget));
  }
  if (absl::StrContains(request.target(), absl::string_view("\0", 1))) {
    return ErrnoStatus(EINVAL, "symlink: target contains NUL");
  }
  if (absl::Status valid = RequireStorableString(request.target(), "symlink: target");
      !valid.ok()) {
    return valid;
  }
  std::optional<uint64_t> new_ino;
  return RunTxn<Attr>(kv_, "symlink", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    absl::StatusOr<InodeRecord> parent = GetParentDir(txn, request.parent());
    if (!parent.ok()) return parent.status();
    if (absl::Status writable = RequireMutable(txn, *parent, "symlink"); !writable.ok()) {
      return writable;
    }
    if (absl::Status free = RequireFreeName(txn, request.parent(), request.name()); !free.ok()) {
      return free;
    }
    absl::StatusOr<uint64_t> ino = NewIno(inodes_, new_ino);
    if (!ino.ok()) return ino.status();
    const int64_t now = clock_->NowNs();
    InodeRecord link = NewInode(*ino, SYMLINK, 0777, request.uid(), request.gid(), now);
    link.set_symlink_target(request.target());
    link.mutable_attr()->set_size(request.target().size());
    if (absl::Status linked =
            LinkNewInode(txn, request.parent(), *parent, request.name(), link, now);
        !linked.ok()) {
      return linked;
    }
    return link.attr();
  });
}

absl::StatusOr<Attr> Namespace::Mknod(const MknodRequest& request) {
  if (absl::Status valid = ValidateNewName(request.name()); !valid.ok()) return valid;
  const std::optional<FileType> type = FileTypeOfMode(request.mode());
  if (!type.has_value() || !IsSpecialFile(*type)) {
    return ErrnoStatus(EINVAL, absl::StrCat("mknod: mode 0", absl::Hex(request.mode()),
                                            " is not a FIFO, socket or device node (regular "
                                            "files are made with Create, directories with "
                                            "Mkdir)"));
  }
  std::optional<uint64_t> new_ino;
  return RunTxn<Attr>(kv_, "mknod", [&](MetaTxn& txn) -> absl::StatusOr<Attr> {
    absl::StatusOr<InodeRecord> parent = GetParentDir(txn, request.parent());
    if (!parent.ok()) return parent.status();
    if (absl::Status writable = RequireMutable(txn, *parent, "mknod"); !writable.ok()) {
      return writable;
    }
    if (absl::Status free = RequireFreeName(txn, request.parent(), request.name()); !free.ok()) {
      return free;
    }
    absl::StatusOr<uint64_t> ino = NewIno(inodes_, new_ino);
    if (!ino.ok()) return ino.status();
    const int64_t now = clock_->NowNs();
    InodeRecord node = NewInode(*ino, *type, request.mode(), request.uid(), request.gid(), now);
    if (*type == CHAR_DEVICE || *type == BLOCK_DEVICE)
      node.mutable_attr()->set_rdev(request.rdev());
    if (absl::Status linked =
            LinkNewInode(txn, request.parent(), *parent, request.name(), node, now);
        !linked.ok()) {
      return linked;
    }
    return node.attr();
  });
}

}  // namespace ckptfs::meta
