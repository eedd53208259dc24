// Namespace::SetXattr, GetXattr, ListXattr and RemoveXattr. Xattrs live in
// the inode record, so changing one is a transaction on that inode. Inside
// an ended checkpoint they no longer change (EROFS); the user.ckptfs. names
// follow checkpoint/xattr_rules.h. Setting or removing
// user.ckptfs.latest_name of a run directory also renames its `latest`
// symlink, in the same transaction (checkpoint/latest.h).
#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/checkpoint/latest.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/checkpoint/xattr_rules.h"
#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

absl::Status ValidateXattrName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxXattrNameLength) {
    return ErrnoStatus(ERANGE, absl::StrCat("xattr name of ", name.size(), " bytes; must be 1..",
                                            kMaxXattrNameLength));
  }
  if (absl::StrContains(name, absl::string_view("\0", 1))) {
    return ErrnoStatus(EINVAL, "xattr name contains NUL");
  }
  return RequireStorableString(name, "xattr name");
}

absl::Status NoData(uint64_t ino, absl::string_view name) {
  return ErrnoStatus(ENODATA, absl::StrCat("inode ", ino, " has no xattr \"", name, "\""));
}

// Stages what user.ckptfs.latest_name of `dir` changing to `value`
// (nullopt: removed) does to its latest symlink, before the caller stores
// the value in `dir`. EINVAL unless `dir` is a directory.
absl::Status RenameLatestFor(MetaTxn& txn, InodeAllocator& inodes, std::optional<uint64_t>& new_ino,
                             InodeRecord& dir, const std::optional<std::string>& value,
                             int64_t now_ns) {
  if (dir.attr().type() != DIRECTORY) {
    return ErrnoStatus(EINVAL, absl::StrCat(kLatestNameXattr,
                                            " is set on a run directory (the "
                                            "parent of checkpoints), not on inode ",
                                            dir.attr().ino()));
  }
  std::optional<std::string> to = std::string(kDefaultLatestName);
  if (value.has_value()) {
    absl::StatusOr<std::optional<std::string>> parsed = ParseLatestName(*value);
    if (!parsed.ok()) return parsed.status();
    to = *std::move(parsed);
  }
  int64_t inode_delta = 0;
  if (absl::Status renamed =
          RenameLatest(txn, inodes, new_ino, dir, LatestPointerName(dir), to, now_ns, inode_delta);
      !renamed.ok()) {
    return renamed;
  }
  if (inode_delta == 0) return absl::OkStatus();
  return txn.AddInodeCount(inode_delta);
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
  const bool latest_name = request.name() == kLatestNameXattr;
  std::optional<uint64_t> latest_ino;  // allocated once, kept across retries
  return RunTxn(kv_, "setxattr", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<InodeRecord> inode = txn.GetInode(request.ino());
    if (!inode.ok()) return inode.status();
    if (absl::Status writable = RequireMutable(txn, *inode, "setxattr"); !writable.ok()) {
      return writable;
    }
    if ((replicas || ec) && inode->attr().type() != DIRECTORY) {
      // A file's copies are fixed by its layout when it is created.
      return ErrnoStatus(EINVAL, absl::StrCat(request.name(),
                                              " is set on a directory (for the "
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
    const int64_t now = clock_->NowNs();
    if (latest_name) {
      if (absl::Status renamed =
              RenameLatestFor(txn, inodes_, latest_ino, *inode, request.value(), now);
          !renamed.ok()) {
        return renamed;
      }
    }
    xattrs[request.name()] = request.value();
    inode->mutable_attr()->set_ctime_ns(now);
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
  std::optional<uint64_t> latest_ino;  // allocated once, kept across retries
  return RunTxn(kv_, "removexattr", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
    if (!inode.ok()) return inode.status();
    if (absl::Status writable = RequireMutable(txn, *inode, "removexattr"); !writable.ok()) {
      return writable;
    }
    if (inode->xattrs().count(std::string(name)) == 0) return NoData(ino, name);
    const int64_t now = clock_->NowNs();
    if (name == kLatestNameXattr) {
      if (absl::Status renamed =
              RenameLatestFor(txn, inodes_, latest_ino, *inode, std::nullopt, now);
          !renamed.ok()) {
        return renamed;
      }
    }
    inode->mutable_xattrs()->erase(std::string(name));
    inode->mutable_attr()->set_ctime_ns(now);
    txn.PutInode(*inode);
    return absl::OkStatus();
  });
}

}  // namespace ckptfs::meta
