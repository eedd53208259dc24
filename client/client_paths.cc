// Client's path calls for tools (client.h, "Paths"): walk "/a/b/c" from the
// root one Lookup at a time. Symlinks are not followed; empty and "."
// components are skipped, ".." is refused (EINVAL) like any invalid name.
//
// The metadata service answers ESTALE when a directory the walk just found
// is removed before the next step reaches it. A walk that meets ESTALE
// starts again from the root once (a directory recreated under the same
// name is then found); a second ESTALE is reported as ENOENT, which is what
// the path names after the race.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "common/errno_status.h"

namespace ckptfs::client {
namespace {

std::vector<absl::string_view> Components(absl::string_view path) {
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == ".") continue;
    parts.push_back(part);
  }
  return parts;
}

absl::Status RequireDirectory(const meta::Attr& attr, absl::string_view path) {
  if (attr.type() == meta::DIRECTORY) return absl::OkStatus();
  return ErrnoStatus(ENOTDIR, absl::StrCat(path, " is not a directory"));
}

// Runs `walk` (one walk of `path` from the root), again once if it met
// ESTALE; ESTALE both times becomes ENOENT.
template <typename Walk>
auto WalkFromRoot(absl::string_view path, Walk walk) -> decltype(walk()) {
  auto result = walk();
  if (result.ok() || ErrnoFromStatus(result.status()) != ESTALE) return result;
  result = walk();
  if (result.ok() || ErrnoFromStatus(result.status()) != ESTALE) return result;
  return ErrnoStatus(ENOENT, absl::StrCat("a directory of ", path,
                                          " was removed while it was "
                                          "being walked: ",
                                          result.status().message()));
}

}  // namespace

absl::StatusOr<meta::Attr> Client::LookupPath(absl::string_view path) {
  return WalkFromRoot(path, [&] { return LookupPathOnce(path); });
}

absl::StatusOr<meta::Attr> Client::MkdirAll(absl::string_view path, uint32_t mode) {
  return WalkFromRoot(path, [&] { return MkdirAllOnce(path, mode); });
}

absl::StatusOr<std::unique_ptr<File>> Client::OpenPath(absl::string_view path, int flags,
                                                       uint32_t mode) {
  return WalkFromRoot(path, [&] { return OpenPathOnce(path, flags, mode); });
}

absl::StatusOr<meta::Attr> Client::LookupPathOnce(absl::string_view path) {
  auto attr = GetAttr(kRootIno);
  for (absl::string_view part : Components(path)) {
    if (!attr.ok()) return attr.status();
    if (absl::Status status = RequireDirectory(*attr, path); !status.ok()) return status;
    attr = Lookup(attr->ino(), part);
  }
  return attr;
}

absl::StatusOr<meta::Attr> Client::MkdirAllOnce(absl::string_view path, uint32_t mode) {
  auto attr = GetAttr(kRootIno);
  for (absl::string_view part : Components(path)) {
    if (!attr.ok()) return attr.status();
    if (absl::Status status = RequireDirectory(*attr, path); !status.ok()) return status;
    const uint64_t parent = attr->ino();
    attr = Lookup(parent, part);
    if (!attr.ok() && ErrnoFromStatus(attr.status()) == ENOENT) {
      attr = Mkdir(parent, part, mode, getuid(), getgid());
      // Someone else made it meanwhile: use theirs.
      if (!attr.ok() && ErrnoFromStatus(attr.status()) == EEXIST) attr = Lookup(parent, part);
    }
  }
  if (attr.ok()) {
    if (absl::Status status = RequireDirectory(*attr, path); !status.ok()) return status;
  }
  return attr;
}

absl::StatusOr<std::unique_ptr<File>> Client::OpenPathOnce(absl::string_view path, int flags,
                                                           uint32_t mode) {
  std::vector<absl::string_view> parts = Components(path);
  if (parts.empty()) return ErrnoStatus(EISDIR, absl::StrCat("cannot open ", path));
  const absl::string_view name = parts.back();
  parts.pop_back();
  auto parent = GetAttr(kRootIno);
  for (absl::string_view part : parts) {
    if (!parent.ok()) return parent.status();
    if (absl::Status status = RequireDirectory(*parent, path); !status.ok()) return status;
    parent = Lookup(parent->ino(), part);
  }
  if (!parent.ok()) return parent.status();
  if (absl::Status status = RequireDirectory(*parent, path); !status.ok()) return status;
  if ((flags & O_CREAT) != 0) {
    auto created = Create(parent->ino(), name, mode, getuid(), getgid(), flags);
    if (!created.ok()) return created.status();
    return std::move(created->file);
  }
  auto attr = Lookup(parent->ino(), name);
  if (!attr.ok()) return attr.status();
  return Open(attr->ino(), flags);
}

}  // namespace ckptfs::client
