// Directory operations: opendir, readdir, releasedir, fsyncdir.
//
// A directory handle (dir_handle.h) pages through Client::ReadDir lazily
// and keeps what it fetched, so the offsets given to the kernel stay stable
// and a directory of any size lists completely.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "fuse/dir_handle.h"
#include "fuse/filesystem.h"
#include "fuse/ops.h"
#include "fuse/reply.h"

namespace ckptfs::fuse {
namespace {

// Entries asked of the metadata service per ReadDir page: large enough that
// listing 10,000 files takes ten RPCs, small enough to bound one reply.
constexpr uint32_t kReadDirPage = 1024;

void OpenDir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Filesystem& fs = FsOf(req);
  client::Client* client = &fs.client();
  // With a directory's attributes cached (--attr_timeout_s or
  // --dir_timeout_s), the kernel may open one another mount removed without
  // asking the service first: answer ESTALE here, so opendir(3) walks the
  // path again, rather than an error from the first getdents, which the
  // kernel does not retry. Uncached, the kernel has just asked (GETATTR).
  if (fs.options().attr_timeout > absl::ZeroDuration() ||
      fs.options().dir_timeout > absl::ZeroDuration()) {
    absl::StatusOr<meta::Attr> attr = CurrentAttr(fs, ino);
    if (!attr.ok()) return ReplyError(req, attr.status(), "opendir", ino);
  }
  // ".." names the root for the root; for any other directory ckptfs would
  // need an RPC to learn the parent, which nothing reads from d_ino, so it
  // names the directory itself.
  auto dir = std::make_unique<DirHandle>(ino, ino, [client, ino](absl::string_view start_after) {
    return client->ReadDir(ino, start_after, kReadDirPage);
  });
  fi->fh = fs.AddDir(std::move(dir));
  if (fuse_reply_open(req, fi) != 0) fs.TakeDir(fi->fh);
}

char* DirBuffer(size_t size) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

// Fills buf[0, size) with entries from `offset` on; returns the bytes used.
// An error after some entries were filled returns those (the kernel comes
// back for the rest and then gets the error).
absl::StatusOr<size_t> DoReadDir(fuse_req_t req, DirHandle& dir, char* buf, size_t size,
                                 uint64_t offset) {
  size_t used = 0;
  for (uint64_t i = offset;; ++i) {
    absl::StatusOr<const DirHandle::Entry*> entry = dir.At(i);
    if (!entry.ok()) {
      if (used > 0) break;
      return entry.status();
    }
    if (*entry == nullptr) break;  // end of directory
    struct stat st;
    std::memset(&st, 0, sizeof(st));
    st.st_ino = (*entry)->ino;
    st.st_mode = (*entry)->type;
    const size_t need = fuse_add_direntry(req, buf + used, size - used, (*entry)->name.c_str(), &st,
                                          static_cast<off_t>(i + 1));
    if (need > size - used) break;  // full; the kernel resumes at offset i
    used += need;
  }
  return used;
}

void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, struct fuse_file_info* fi) {
  char* buf = DirBuffer(size);
  absl::StatusOr<size_t> used =
      DoReadDir(req, Filesystem::DirOf(fi->fh), buf, size, static_cast<uint64_t>(offset));
  // ENOENT stays ENOENT: getdents is not retried on ESTALE, and callers
  // that remove trees concurrently expect ENOENT for a directory gone.
  if (!used.ok()) return ReplyError(req, used.status(), "readdir", ino);
  fuse_reply_buf(req, buf, *used);
}

void ReleaseDir(fuse_req_t req, fuse_ino_t /*ino*/, struct fuse_file_info* fi) {
  FsOf(req).TakeDir(fi->fh);  // destroyed here
  fuse_reply_err(req, 0);
}

// Directory operations are durable in the metadata service when they return.
void FsyncDir(fuse_req_t req, fuse_ino_t /*ino*/, int /*datasync*/, struct fuse_file_info* /*fi*/) {
  fuse_reply_err(req, 0);
}

}  // namespace

void AddDirOps(fuse_lowlevel_ops* ops) {
  ops->opendir = OpenDir;
  ops->readdir = ReadDir;
  ops->releasedir = ReleaseDir;
  ops->fsyncdir = FsyncDir;
}

}  // namespace ckptfs::fuse
