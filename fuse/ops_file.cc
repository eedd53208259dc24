// File operations: create, open, read, write, flush, release, fsync.
//
// Set-id bits: a truncating open and a direct_io write by a process other
// than root clear the file's set-user-ID bit (and set-group-ID where
// group-execute is set), which the kernel leaves to the filesystem there;
// truncate, chown and cached writes the kernel clears itself (Filesystem::
// Init, fuse/setid_clearing.h).
//
// An open file is a libckptfs File (client/file.h) owned by the Filesystem
// and named to the kernel by fi->fh. Write-only opens get direct_io, so
// checkpoint payload goes from the writer's buffer to the client's chunk
// buffers without filling the page cache; opens that can read stay cached,
// so mmap works (with --direct_io_reads, where the kernel keeps direct_io
// files mmap-able, Filesystem::direct_io_reads, the first read-only open
// of each version of a file gets direct_io too, and later ones share the
// page cache: FirstReads). A cached read-only open keeps the kernel's
// pages of the file only when the service's attributes equal a version
// whose older pages an earlier open is known to have dropped
// (PageCacheVersions); any other open drops them, so each open sees the
// newest data (close-to-open). close(2)
// sends FUSE_FLUSH, which waits for every chunk and commits the size: that
// is where close(2) gets a write's error.
// A read replies from the bytes where the client holds them (a ReadView of
// pinned read-cache chunks), without a copy in this process.
#include <fcntl.h>
#include <limits.h>
#include <sys/uio.h>

#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "client/file.h"
#include "common/errno_status.h"
#include "common/file_type.h"
#include "common/log.h"
#include "fuse/filesystem.h"
#include "fuse/op_metrics.h"
#include "fuse/ops.h"
#include "fuse/reply.h"

namespace ckptfs::fuse {
namespace {

bool IsReadOnly(int flags) { return (flags & O_ACCMODE) == O_RDONLY; }

// Sets the reply's cache flags for the handle `fi->fh` just added. `create`:
// new or truncated content, so nothing cached is kept.
void SetCacheMode(Filesystem& fs, bool create, struct fuse_file_info* fi) {
  const FilesystemOptions& options = fs.options();
  const client::File& file = Filesystem::FileOf(fi->fh);
  fi->direct_io = !options.writeback_cache &&
                  ((options.direct_io_writes && (fi->flags & O_ACCMODE) == O_WRONLY) ||
                   (fs.direct_io_reads() && IsReadOnly(fi->flags) &&
                    fs.first_reads().IsFirst(file.ino(), file.opened_version())));
  if (!create && IsReadOnly(fi->flags) && !fi->direct_io) {
    fi->keep_cache = fs.page_cache_versions().KeepOnOpen(file.ino(), file.opened_version(), fi->fh);
  } else {
    fi->keep_cache = 0;
  }
  // A reader's close(2) has nothing to publish: the kernel may skip
  // FUSE_FLUSH for it entirely (one round trip less per load).
  fi->noflush = IsReadOnly(fi->flags);
  // The kernel leaves set-id clearing on a direct_io write to the mount.
  if (fi->direct_io && !IsReadOnly(fi->flags)) {
    const uint32_t mode = file.opened_mode();
    if (ModeAfterUnprivilegedWrite(mode) != mode) fs.setid_clearing().Arm(fi->fh);
  }
}

// Hands `file` to the kernel with `send`; when the reply cannot be
// delivered (the opener was interrupted), the kernel will never use or
// release the handle, so it is closed here.
template <typename SendReply>
void HandOver(Filesystem& fs, std::unique_ptr<client::File> file, bool create,
              struct fuse_file_info* fi, SendReply send) {
  fi->fh = fs.AddFile(std::move(file));
  SetCacheMode(fs, create, fi);
  if (send() != 0) {
    fs.page_cache_versions().Abandon(fi->fh);
    fs.setid_clearing().Disarm(fi->fh);
    std::unique_ptr<client::File> orphan = fs.TakeFile(fi->fh);
    if (orphan != nullptr) orphan->Close().IgnoreError();
  }
}

// Clears the file's set-user-ID bit, and its set-group-ID bit where
// group-execute is set (SetAttr KILL_SETID, from the mode it has then), as a
// write or truncate by a process without CAP_FSETID does on Linux. Root is
// taken to hold CAP_FSETID.
absl::Status ClearSetId(Filesystem& fs, fuse_req_t req, fuse_ino_t ino) {
  if (fuse_req_ctx(req)->uid == 0) return absl::OkStatus();
  meta::SetAttrRequest request;
  request.set_ino(ino);
  request.set_valid(meta::KILL_SETID);
  return fs.client().SetAttr(request).status();
}

// An open with O_TRUNC truncates in the service (atomic_o_trunc), where the
// kernel's own clearing does not reach.
absl::Status ClearSetIdOnTruncatingOpen(Filesystem& fs, fuse_req_t req, fuse_ino_t ino,
                                        const client::File& file) {
  const uint32_t mode = file.opened_mode();
  if ((file.flags() & O_TRUNC) == 0 || ModeAfterUnprivilegedWrite(mode) == mode) {
    return absl::OkStatus();
  }
  return ClearSetId(fs, req, ino);
}

// Before a write, as Linux does it; once per armed handle (SetIdClearing).
absl::Status ClearSetIdBeforeWrite(Filesystem& fs, fuse_req_t req, fuse_ino_t ino, uint64_t fh) {
  if (fuse_req_ctx(req)->uid == 0 || !fs.setid_clearing().Disarm(fh)) return absl::OkStatus();
  absl::Status cleared = ClearSetId(fs, req, ino);
  if (!cleared.ok()) fs.setid_clearing().Arm(fh);  // the next write tries again
  return cleared;
}

// --- create / open -----------------------------------------------------------

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
            struct fuse_file_info* fi) {
  Filesystem& fs = FsOf(req);
  const fuse_ctx* ctx = fuse_req_ctx(req);
  absl::StatusOr<client::Client::Created> created =
      fs.client().Create(parent, name, mode & 07777, ctx->uid, ctx->gid, fi->flags);
  if (!created.ok()) return ReplyError(req, created.status(), "create", parent);
  if (absl::Status cleared =
          ClearSetIdOnTruncatingOpen(fs, req, created->attr.ino(), *created->file);
      !cleared.ok()) {
    return ReplyError(req, cleared, "create (clearing set-id bits)", parent);
  }
  fuse_entry_param entry = MakeEntry(fs, created->attr);
  HandOver(fs, std::move(created->file), /*create=*/true, fi,
           [&] { return fuse_reply_create(req, &entry, fi); });
}

void Open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Filesystem& fs = FsOf(req);
  absl::StatusOr<std::unique_ptr<client::File>> file = fs.client().Open(ino, fi->flags);
  if (!file.ok()) return ReplyError(req, StaleIfInodeGone(fs, ino, file.status()), "open", ino);
  if (absl::Status cleared = ClearSetIdOnTruncatingOpen(fs, req, ino, **file); !cleared.ok()) {
    return ReplyError(req, cleared, "open (clearing set-id bits)", ino);
  }
  HandOver(fs, std::move(*file), /*create=*/false, fi, [&] { return fuse_reply_open(req, fi); });
}

// --- read / write ------------------------------------------------------------

// Copying fallback of ReplyView: one buffer per worker thread, grown to
// the largest read seen and reused.
char* ReadBuffer(size_t size) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

// Replies with the view's bytes where they lie (pinned read-cache chunks,
// or the buffer a direct fetch filled): the header and every span go to
// the kernel in one writev, which copies them into the reader's pages —
// the hop's one copy, and no copy in user space. fuse_reply_iov rather than
// fuse_reply_data: libfuse 3.14's fuse_reply_data copies a bufvec of more
// than one buffer into a temporary one first (a read straddling two
// chunks), and with --splice it write()s even a single memory buffer into
// a pipe before splicing it. The view must live until this returns.
int ReplyView(fuse_req_t req, const client::ReadView& view) {
  const absl::Span<const struct iovec> spans = view.spans();
  if (spans.empty()) return fuse_reply_buf(req, nullptr, 0);
  // One span per chunk touched: a 1 MiB read over chunks of at least 64 KiB
  // has at most 17, far below writev's limit (one more for the header).
  if (spans.size() < IOV_MAX) {
    return fuse_reply_iov(req, spans.data(), static_cast<int>(spans.size()));
  }
  char* buf = ReadBuffer(view.size());
  view.CopyTo(buf);
  return fuse_reply_buf(req, buf, view.size());
}

void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, struct fuse_file_info* fi) {
  // A READ on the handle means its open(2) is past the kernel's page drop.
  FsOf(req).page_cache_versions().OnHandleUsed(fi->fh);
  absl::StatusOr<client::ReadView> view =
      Filesystem::FileOf(fi->fh).View(static_cast<uint64_t>(offset), size);
  if (!view.ok()) return ReplyError(req, view.status(), "read", ino);
  // Counted first: once replied, the reader (or a scrape after it) may run.
  CountReadBytes(view->size());
  ReplyView(req, *view);
}

// A write's payload as libfuse hands it over: in memory, or (splice) still
// in the pipe the kernel filled; fuse_buf_copy moves it either way, the
// pipe case with one read() straight into the chunk buffer.
class BufvecSource final : public client::WriteSource {
 public:
  explicit BufvecSource(struct fuse_bufvec* bufv) : bufv_(bufv) {}
  absl::Status CopyTo(char* dst, size_t n) override {
    size_t done = 0;
    while (done < n) {  // a pipe read may return less than asked
      struct fuse_bufvec to = FUSE_BUFVEC_INIT(n - done);
      to.buf[0].mem = dst + done;
      const ssize_t copied = fuse_buf_copy(&to, bufv_, static_cast<fuse_buf_copy_flags>(0));
      if (copied < 0) return ErrnoStatus(static_cast<int>(-copied), "reading a write's payload");
      if (copied == 0) {
        return ErrnoStatus(
            EIO, absl::StrCat("a write's payload ended after ", done, " of ", n, " bytes"));
      }
      done += static_cast<size_t>(copied);
    }
    return absl::OkStatus();
  }

 private:
  struct fuse_bufvec* const bufv_;
};

void WriteBuf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec* bufv, off_t offset,
              struct fuse_file_info* fi) {
  Filesystem& fs = FsOf(req);
  if (absl::Status cleared = ClearSetIdBeforeWrite(fs, req, ino, fi->fh); !cleared.ok()) {
    return ReplyError(req, cleared, "write (clearing set-id bits)", ino);
  }
  const size_t size = fuse_buf_size(bufv);
  BufvecSource source(bufv);
  absl::StatusOr<size_t> n =
      Filesystem::FileOf(fi->fh).WriteFrom(static_cast<uint64_t>(offset), source, size);
  if (!n.ok()) return ReplyError(req, n.status(), "write", ino);
  CountWrittenBytes(*n);
  fuse_reply_write(req, *n);
}

// --- flush / release / fsync -------------------------------------------------

absl::Status DoFlush(struct fuse_file_info* fi) {
  client::File& file = Filesystem::FileOf(fi->fh);
  // A reader's close has nothing to publish; don't make it wait for the
  // chunks some writer of the same inode has in flight.
  if (IsReadOnly(file.flags())) return absl::OkStatus();
  return file.Flush();
}

void Flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  absl::Status status = DoFlush(fi);
  if (!status.ok()) return ReplyError(req, status, "flush", ino);
  fuse_reply_err(req, 0);
}

void Release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Filesystem& fs = FsOf(req);
  fs.page_cache_versions().OnHandleUsed(fi->fh);
  fs.setid_clearing().Disarm(fi->fh);
  std::unique_ptr<client::File> file = fs.TakeFile(fi->fh);
  if (file != nullptr) {
    // close(2) has returned already (its error came from flush); the kernel
    // ignores release's reply, so an error here can only be logged.
    absl::Status status = file->Close();
    if (!status.ok()) {
      CKPTFS_LOG(kWarning) << "release of ino " << ino << ": " << status;
    }
  }
  fuse_reply_err(req, 0);
}

// fdatasync and fsync are the same here: ckptfs has no metadata that fsync
// would make durable beyond what CommitWrite already does.
void Fsync(fuse_req_t req, fuse_ino_t ino, int /*datasync*/, struct fuse_file_info* fi) {
  absl::Status status = Filesystem::FileOf(fi->fh).Fsync();
  if (!status.ok()) return ReplyError(req, status, "fsync", ino);
  fuse_reply_err(req, 0);
}

}  // namespace

void AddFileOps(fuse_lowlevel_ops* ops) {
  ops->create = Create;
  ops->open = Open;
  ops->read = Read;
  ops->write_buf = WriteBuf;
  ops->flush = Flush;
  ops->release = Release;
  ops->fsync = Fsync;
}

}  // namespace ckptfs::fuse
