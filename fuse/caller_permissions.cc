// See caller_permissions.h.
#include "fuse/caller_permissions.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ckptfs::fuse {

bool Caller::InGroup(gid_t g) const {
  return g == gid || std::find(groups.begin(), groups.end(), g) != groups.end();
}

bool MayAccess(const Caller& caller, const meta::Attr& attr, int mask) {
  if (caller.IsRoot()) {
    // Root may search any directory and read or write anything, but runs
    // a file only when someone may.
    const bool is_dir = S_ISDIR(attr.mode());
    return (mask & X_OK) == 0 || is_dir || (attr.mode() & (S_IXUSR | S_IXGRP | S_IXOTH)) != 0;
  }
  int shift = 0;  // the others' bits
  if (caller.uid == attr.uid()) {
    shift = 6;
  } else if (caller.InGroup(attr.gid())) {
    shift = 3;
  }
  const int granted = static_cast<int>((attr.mode() >> shift) & 07);
  // R_OK, W_OK and X_OK are 4, 2 and 1, as the mode's rwx bits.
  return (mask & ~granted & 07) == 0;
}

bool MayDeleteEntry(const Caller& caller, const meta::Attr& dir, const meta::Attr& entry) {
  if (!MayAccess(caller, dir, W_OK | X_OK)) return false;
  if ((dir.mode() & S_ISVTX) == 0 || caller.IsRoot()) return true;
  return caller.uid == entry.uid() || caller.uid == dir.uid();
}

std::string DescribeCaller(const Caller& caller) {
  return absl::StrCat("uid ", caller.uid, " (gid ", caller.gid, ")");
}

std::string DescribeOwnership(const meta::Attr& attr) {
  return absl::StrFormat("mode %04o, owner uid %u gid %u", attr.mode() & 07777, attr.uid(),
                         attr.gid());
}

}  // namespace ckptfs::fuse
