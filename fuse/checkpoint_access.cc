// See checkpoint_access.h.
#include "fuse/checkpoint_access.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/checkpoint_xattr_parsing.h"
#include "common/errno_status.h"

namespace ckptfs::fuse {
namespace {

// Entries read per ReadDir while walking a checkpoint.
constexpr uint32_t kWalkPage = 1024;

}  // namespace

absl::Status CheckCommitAsRead(client::Client& client, const Caller& caller, uint64_t ino,
                               absl::string_view name) {
  if (caller.IsRoot()) return absl::OkStatus();
  absl::StatusOr<meta::Attr> dir = client.GetAttr(ino);
  if (!dir.ok()) return dir.status();
  if (MayAccess(caller, *dir, W_OK | X_OK)) return absl::OkStatus();
  return ErrnoStatus(EACCES,
                     absl::StrCat(DescribeCaller(caller), " may not commit through ", name,
                                  " on directory ", ino, " (", DescribeOwnership(*dir),
                                  "): a commit needs write and search permission on the checkpoint "
                                  "directory, as writing its files does; read permission lets one "
                                  "only read its state"));
}

namespace {

// A directory of the checkpoint still to walk, with its path in it.
struct PendingDir {
  meta::Attr attr;
  std::string path;
};

// Whether `caller` may delete every entry below checkpoint `ckpt` (`name`
// in its run directory): OK, or the first directory or entry that stops it.
absl::Status CheckMayEmpty(client::Client& client, const Caller& caller, const meta::Attr& ckpt,
                           absl::string_view name) {
  auto refuse = [&](int err, const std::string& path, const meta::Attr& attr,
                    absl::string_view why) {
    return ErrnoStatus(
        err, absl::StrCat(DescribeCaller(caller), " may not remove checkpoint \"", name,
                          "\": removing it takes every file in it, and ", why, " (\"", path, "\", ",
                          DescribeOwnership(attr),
                          "); its owner or root can remove it, or `rm -r` what you may"));
  };
  std::vector<PendingDir> dirs{{ckpt, std::string(name)}};
  while (!dirs.empty()) {
    PendingDir dir = std::move(dirs.back());
    dirs.pop_back();
    if (!MayAccess(caller, dir.attr, R_OK | W_OK | X_OK)) {
      return refuse(EACCES, dir.path, dir.attr,
                    "you lack read, write and search permission on this directory of it");
    }
    const bool sticky = (dir.attr.mode() & S_ISVTX) != 0;
    std::string after;
    while (true) {
      absl::StatusOr<meta::ReadDirReply> page = client.ReadDir(dir.attr.ino(), after, kWalkPage);
      if (!page.ok()) return page.status();
      for (const meta::DirEntry& entry : page->entries()) {
        after = entry.name();
        if (entry.name() == "." || entry.name() == "..") continue;
        const bool is_dir = entry.type() == meta::DIRECTORY;
        if (!is_dir && !sticky) continue;  // the directory's bits settle it
        absl::StatusOr<meta::Attr> attr = client.GetAttr(entry.ino());
        if (!attr.ok()) {
          if (ErrnoFromStatus(attr.status()) == ENOENT) continue;  // gone meanwhile
          return attr.status();
        }
        const std::string path = absl::StrCat(dir.path, "/", entry.name());
        if (!MayDeleteEntry(caller, dir.attr, *attr)) {
          return refuse(EPERM, path, *attr,
                        "its directory is sticky and you own neither this entry nor the "
                        "directory");
        }
        if (is_dir) dirs.push_back({*std::move(attr), path});
      }
      if (!page->more()) break;
    }
  }
  return absl::OkStatus();
}

// What a removal checked: the checkpoint's inode, or the error to answer.
absl::StatusOr<uint64_t> CheckRemoval(client::Client& client, const Caller& caller,
                                      uint64_t run_dir, absl::string_view name) {
  absl::StatusOr<meta::Attr> dir = client.GetAttr(run_dir);
  if (!dir.ok()) return dir.status();
  absl::StatusOr<meta::Attr> ckpt = client.Lookup(run_dir, name);
  if (!ckpt.ok()) return ckpt.status();
  if (!MayDeleteEntry(caller, *dir, *ckpt)) {
    const bool has_bits = MayAccess(caller, *dir, W_OK | X_OK);
    return ErrnoStatus(
        has_bits ? EPERM : EACCES,
        absl::StrCat(DescribeCaller(caller), " may not remove checkpoint \"", name,
                     "\" from directory ", run_dir, " (", DescribeOwnership(*dir), "): ",
                     has_bits ? "the directory is sticky and you own neither it nor the "
                                "checkpoint"
                              : "that needs write and search permission on the directory"));
  }
  if (caller.uid != ckpt->uid()) {
    if (absl::Status emptied = CheckMayEmpty(client, caller, *ckpt, name); !emptied.ok()) {
      return emptied;
    }
  }
  return ckpt->ino();
}

}  // namespace

Caller CallerOf(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  Caller caller;
  caller.uid = ctx->uid;
  caller.gid = ctx->gid;
  if (caller.IsRoot()) return caller;
  // libfuse reads them from /proc; a caller gone meanwhile keeps none,
  // which can only refuse more.
  std::vector<gid_t> groups(64);
  int n = fuse_req_getgroups(req, static_cast<int>(groups.size()), groups.data());
  if (n > static_cast<int>(groups.size())) {
    groups.resize(static_cast<size_t>(n));
    n = fuse_req_getgroups(req, static_cast<int>(groups.size()), groups.data());
  }
  if (n > 0) {
    groups.resize(std::min(groups.size(), static_cast<size_t>(n)));
    caller.groups = std::move(groups);
  }
  return caller;
}

absl::Status RemoveCheckedCheckpoint(client::Client& client, const Caller& caller, uint64_t run_dir,
                                     absl::string_view value) {
  absl::StatusOr<client::CheckpointRemoval> removal = client::ParseCheckpointRemoval(value);
  if (!removal.ok()) return removal.status();
  std::optional<client::Client::ExpectedCheckpoint> expected;
  if (removal->expected_ino != 0) {
    expected = client::Client::ExpectedCheckpoint{removal->expected_ino, removal->expected_state};
  }
  if (!caller.IsRoot()) {
    absl::StatusOr<uint64_t> checked = CheckRemoval(client, caller, run_dir, removal->name);
    if (!checked.ok()) return checked.status();
    // Only the checkpoint checked goes (in the state asked for, if any).
    if (expected.has_value() && expected->ino != *checked) {
      return ErrnoStatus(ESTALE, absl::StrCat("\"", removal->name, "\" in directory ", run_dir,
                                              " is no longer the checkpoint to remove"));
    }
    if (!expected.has_value()) expected = client::Client::ExpectedCheckpoint{*checked};
  }
  return client.RemoveCheckpoint(run_dir, removal->name, expected);
}

}  // namespace ckptfs::fuse
