// Extended-attribute name rules of the ckptfs mount, and the packing of a
// name list into the listxattr(2) wire format. Pure functions, unit-tested
// in tests/fuse/xattr_names_test.cc. Thread-safe.
#ifndef CKPTFS_FUSE_XATTR_NAMES_H_
#define CKPTFS_FUSE_XATTR_NAMES_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ckptfs::fuse {

// True for names the metadata service stores: the "user." and "trusted."
// namespaces (the kernel checks who may touch which). "security." and
// "system." (capabilities, ACLs, SELinux labels) are not kept: the kernel
// asks for security.capability before writes to a file, and answering that
// locally keeps a metadata RPC off the write path.
bool IsStoredXattrName(absl::string_view name);

// "a\0b\0": each name followed by a NUL, as listxattr(2) returns them.
std::string PackXattrNames(const std::vector<std::string>& names);

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_XATTR_NAMES_H_
