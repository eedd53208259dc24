// See attr.h.
#include "fuse/attr.h"

#include <fuse_lowlevel.h>

#include <cstring>
#include <limits>

#include "common/file_type.h"

namespace ckptfs::fuse {
namespace {

constexpr int64_t kNsPerSecond = 1000000000;

// statfs has no notion of an inode limit in ckptfs (inode numbers are 64-bit
// and never reused); report a large constant headroom so tools that check
// f_ffree never think the filesystem is full.
constexpr uint64_t kFreeInodes = uint64_t{1} << 32;

}  // namespace

int64_t TimespecToNs(const struct timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * kNsPerSecond + ts.tv_nsec;
}

struct timespec NsToTimespec(int64_t ns) {
  struct timespec ts;
  ts.tv_sec = ns / kNsPerSecond;
  ts.tv_nsec = ns % kNsPerSecond;
  if (ts.tv_nsec < 0) {  // times before 1970 round towards minus infinity
    ts.tv_nsec += kNsPerSecond;
    ts.tv_sec -= 1;
  }
  return ts;
}

struct stat AttrToStat(const meta::Attr& attr) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = attr.ino();
  st.st_mode = ModeTypeBits(attr.type()) | (attr.mode() & 07777);
  st.st_nlink = attr.nlink();
  st.st_rdev = static_cast<dev_t>(attr.rdev());
  st.st_uid = attr.uid();
  st.st_gid = attr.gid();
  st.st_size = static_cast<off_t>(attr.size());
  st.st_blksize = kPreferredIoSize;
  st.st_blocks = static_cast<blkcnt_t>((attr.size() + 511) / 512);
  st.st_atim = NsToTimespec(attr.atime_ns());
  st.st_mtim = NsToTimespec(attr.mtime_ns());
  st.st_ctim = NsToTimespec(attr.ctime_ns());
  return st;
}

struct statvfs StatFsToStatvfs(const meta::StatFsReply& reply) {
  struct statvfs st;
  std::memset(&st, 0, sizeof(st));
  st.f_bsize = kStatFsBlockSize;
  st.f_frsize = kStatFsBlockSize;
  st.f_blocks = reply.total_bytes() / kStatFsBlockSize;
  st.f_bfree = reply.free_bytes() / kStatFsBlockSize;
  st.f_bavail = st.f_bfree;
  st.f_files = reply.files() + kFreeInodes;
  st.f_ffree = kFreeInodes;
  st.f_favail = kFreeInodes;
  st.f_namemax = 255;
  return st;
}

meta::SetAttrRequest MakeSetAttrRequest(uint64_t ino, const struct stat& attr, int to_set) {
  meta::SetAttrRequest request;
  request.set_ino(ino);
  uint32_t valid = 0;
  if (to_set & FUSE_SET_ATTR_MODE) {
    valid |= meta::SET_MODE;
    request.set_mode(attr.st_mode & 07777);
  }
  if (to_set & FUSE_SET_ATTR_UID) {
    valid |= meta::SET_UID;
    request.set_uid(attr.st_uid);
  }
  if (to_set & FUSE_SET_ATTR_GID) {
    valid |= meta::SET_GID;
    request.set_gid(attr.st_gid);
  }
  if (to_set & FUSE_SET_ATTR_SIZE) {
    valid |= meta::SET_SIZE;
    request.set_size(static_cast<uint64_t>(attr.st_size));
  }
  // The kernel sets both ATIME and ATIME_NOW for utimensat(UTIME_NOW) (and
  // for utime(NULL)); "now" wins, taken from the service's clock so every
  // mount agrees on it.
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
    valid |= meta::SET_ATIME_NOW;
  } else if (to_set & FUSE_SET_ATTR_ATIME) {
    valid |= meta::SET_ATIME;
    request.set_atime_ns(TimespecToNs(attr.st_atim));
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    valid |= meta::SET_MTIME_NOW;
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    valid |= meta::SET_MTIME;
    request.set_mtime_ns(TimespecToNs(attr.st_mtim));
  }
  request.set_valid(valid);
  return request;
}

}  // namespace ckptfs::fuse
