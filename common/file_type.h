// The mapping between ckptfs file types (proto/meta.proto FileType) and the
// type bits of a POSIX st_mode, and the mode rules POSIX attaches to them,
// in one place for the service, the client and the mount.
//
// Thread-safety: pure functions.
#ifndef CKPTFS_COMMON_FILE_TYPE_H_
#define CKPTFS_COMMON_FILE_TYPE_H_

#include <cstdint>
#include <optional>

#include "proto/meta.pb.h"

namespace ckptfs {

// The st_mode type bits of `type`; 0 for FILE_TYPE_UNSPECIFIED and for a
// value this build does not know (readdir's DT_UNKNOWN).
uint32_t ModeTypeBits(meta::FileType type);

// The file type of st_mode `mode`'s type bits; nullopt for bits that name
// none (0 or an unknown value).
std::optional<meta::FileType> FileTypeOfMode(uint32_t mode);

// Whether `type` is a special file: FIFO, socket, or character or block
// device (made by Mknod; no data of its own).
bool IsSpecialFile(meta::FileType type);

// `mode` after a write or truncate by a process without CAP_FSETID: the
// set-user-ID bit cleared, and the set-group-ID bit where group-execute is
// set (without it, set-group-ID marks mandatory locking and stays), as
// Linux does. Equal to `mode` when there is nothing to clear.
uint32_t ModeAfterUnprivilegedWrite(uint32_t mode);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_FILE_TYPE_H_
