// Conversions between ckptfs metadata records and the structs FUSE speaks.
//
// Pure functions with no FUSE session or client behind them, so they are
// unit-tested on their own (tests/fuse/attr_test.cc). FUSE inode numbers are
// ckptfs inode numbers (global, never reused), so no translation table exists
// and the generation number is constant. Thread-safe.
#ifndef CKPTFS_FUSE_ATTR_H_
#define CKPTFS_FUSE_ATTR_H_

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include <cstdint>

#include "proto/meta.pb.h"

namespace ckptfs::fuse {

// st_blksize reported for every inode. Programs size their I/O buffers by it
// (stdio, Python's io, cp), so a large value turns many small writes into
// few max_write-sized FUSE requests.
inline constexpr uint32_t kPreferredIoSize = 1u << 20;

// Block size statfs reports; f_blocks and friends count in these.
inline constexpr uint32_t kStatFsBlockSize = 4096;

// The stat(2) view of `attr`: type and permission bits, ids, exact size,
// st_blocks in 512-byte units, nanosecond times.
struct stat AttrToStat(const meta::Attr& attr);

// The statvfs(3) view of the cluster's capacity, in kStatFsBlockSize blocks.
struct statvfs StatFsToStatvfs(const meta::StatFsReply& reply);

// Nanoseconds since the epoch of `ts`.
int64_t TimespecToNs(const struct timespec& ts);
struct timespec NsToTimespec(int64_t ns);

// The SetAttrRequest for a FUSE setattr of `ino` with the FUSE_SET_ATTR_*
// bits in `to_set` read from `attr`. Time fields "now" map to the service's
// clock (SET_*_NOW); ctime is always the service's business. Mode keeps only
// the permission bits (07777): the type of an inode never changes.
meta::SetAttrRequest MakeSetAttrRequest(uint64_t ino, const struct stat& attr, int to_set);

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_ATTR_H_
