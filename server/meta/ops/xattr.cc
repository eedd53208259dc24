// Namespace::SetXattr, GetXattr, ListXattr and RemoveXattr. Xattrs live in
// the inode record, so changing one is a transaction on that inode. Inside
// an ended checkpoint they no longer change (EROFS); the user.ckptfs. names
// follow checkpoint/xattr_rules.h.
#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/checkpoint/guard.h"
#include "server/meta/checkpoint/xattr_rules.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

absl::Status ValidateXattrName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxXattrNameLength) {
    return ErrnoStatus(ERANGE, absl::StrCat("xattr name of ", name.size(),
                                            " bytes; must be 1..", kMaxXattrNameLength));
  }
  if (absl::StrContains(name, absl::string_view("\0", 1))) {
    return ErrnoStatus(EINVAL, "xattr name contains NUL");
  }
  return RequireStorableString(name, "xattr name");
}

absl::Status NoData(uint64_t ino, absl::string_view name) {
  return ErrnoStatus(ENODATA, absl::StrCat("inode ", ino, " has no xattr \"", name, "\""));
}

}  // namespace

absl::Status Namespace::SetXattr(const SetXattrRequest& request) {
  if (absl::Status valid = ValidateXattrName(request.name()); !valid.ok()) return valid;
  if (absl::Status valid = ValidateXattrNameNotReserved(request.name()); !valid.ok()) {
    return valid;
  }
  if (absl::Status valid = ValidateCheckpointXattrValue(request.name(), request.value());
      !valid.ok()) {
    return valid;
  }
  if (request.value().size() > kMaxXattrValueSize) {
    return ErrnoStatus(E2BIG, absl::StrCat("xattr value of ", request.value().size(),
                                           " bytes is over ", kMaxXattrValueSize));
  }
  if (request.name() == kChunkSizeXattr) {
    uint64_t chunk_size = 0;
    if (!absl::SimpleAtoi(request.value(), &chunk_size)) {
      return ErrnoStatus(EINVAL, absl::StrCat(kChunkSizeXattr, " must be a decimal number"));
    }
    if (absl::Status valid = ValidateChunkSize(chunk_size); !valid.ok()) return valid;
  }
  const bool replicas = request.name() == kReplicasXattr;
  if (replicas) {
    if (absl::StatusOr<uint32_t> parsed = ParseReplicas(request.value()); !parsed.ok()) {
      return parsed.status();
    }
  }
  const bool ec = request.name() == kErasureCodeXattr;
  if (ec) {
    if (absl::StatusOr<ErasureCodeSpec> parsed = ParseErasureCode(request.value()); !parsed.ok()) {
      return parsed.status();
    }
  }
  return RunTxn(kv_, "setxattr", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<InodeRecord> inode = txn.GetInode(request.ino());
    if (!inode.ok()) return inode.status();
    if (absl::Status writable = RequireMutable(txn, *inode, "setxattr"); !writable.ok()) {
      return writable;
    }
    if ((replicas || ec) && inode->attr().type() != DIRECTORY) {
      // A file's copies are fixed by its layout when it is created.
      return ErrnoStatus(EINVAL, absl::StrCat(request.name(), " is set on a directory (for the "
                                              "files created in it), not on inode ",
                                              request.ino()));
    }
    auto& xattrs = *inode->mutable_xattrs();
    const bool exists = xattrs.count(request.name()) > 0;
    if (request.create_only() && exists) {
      return ErrnoStatus(EEXIST, absl::StrCat("inode ", request.ino(), " already has xattr \"",
                                              request.name(), "\""));
    }
    if (request.replace_only() && !exists) return NoData(request.ino(), request.name());
    size_t total = request.name().size() + request.value().size();
    for (const auto& [name, value] : xattrs) {
      if (name != request.name()) total += name.size() + value.size();
    }
    if (total > kMaxXattrBytesPerInode) {
      return ErrnoStatus(ENOSPC, absl::StrCat("inode ", request.ino(), ": xattrs would take ",
                                              total, " bytes, over ", kMaxXattrBytesPerInode));
    }
    xattrs[request.name()] = request.value();
    inode->mutable_attr()->set_ctime_ns(clock_->NowNs());
    txn.PutInode(*inode);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::string> Namespace::GetXattr(uint64_t ino, absl::string_view name) {
  if (absl::Status valid = ValidateXattrName(name); !valid.ok()) return valid;
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
  if (!inode.ok()) return inode.status();
  auto it = inode->xattrs().find(std::string(name));
  if (it == inode->xattrs().end()) return NoData(ino, name);
  return it->second;
}

absl::StatusOr<std::vector<std::string>> Namespace::ListXattr(uint64_t ino) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
  if (!inode.ok()) return inode.status();
  std::vector<std::string> names;
  names.reserve(inode->xattrs().size());
  for (const auto& [name, value] : inode->xattrs()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status Namespace::RemoveXattr(uint64_t ino, absl::string_view name) {
  if (absl::Status valid = ValidateXattrName(name); !valid.ok()) return valid;
  if (absl::Status valid = ValidateXattrNameNotReserved(name); !valid.ok()) return valid;
  return RunTxn(kv_, "removexattr", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
    if (!inode.ok()) return inode.status();
    if (absl::Status writable = RequireMutable(txn, *inode, "removexattr"); !writable.ok()) {
      return writable;
    }
    if (inode->mutable_xattrs()->erase(std::string(name)) == 0) return NoData(ino, name);
    inode->mutable_attr()->set_ctime_ns(clock_->NowNs());
    txn.PutInode(*inode);
    return absl::OkStatus();
  });
}

}  // namespace ckptfs::meta
