// See filesystem.h.
#include "fuse/filesystem.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/log.h"
#include "fuse/op_metrics.h"
#include "fuse/ops.h"

namespace ckptfs::fuse {
namespace {

void InitOp(void* userdata, struct fuse_conn_info* conn) {
  static_cast<Filesystem*>(userdata)->Init(conn);
}

}  // namespace

Filesystem::Filesystem(std::unique_ptr<client::Client> client, FilesystemOptions options)
    : client_(std::move(client)),
      options_(options),
      attr_timeout_s_(absl::ToDoubleSeconds(options.attr_timeout)),
      entry_timeout_s_(absl::ToDoubleSeconds(options.entry_timeout)),
      dir_timeout_s_(absl::ToDoubleSeconds(options.dir_timeout)) {}

double Filesystem::AttrTimeoutFor(const meta::Attr& attr) const {
  return attr.type() == meta::DIRECTORY ? std::max(attr_timeout_s_, dir_timeout_s_)
                                        : attr_timeout_s_;
}

double Filesystem::EntryTimeoutFor(const meta::Attr& attr) const {
  return attr.type() == meta::DIRECTORY ? std::max(entry_timeout_s_, dir_timeout_s_)
                                        : entry_timeout_s_;
}

Filesystem::~Filesystem() {
  absl::flat_hash_map<uint64_t, std::unique_ptr<client::File>> files;
  absl::flat_hash_map<uint64_t, std::unique_ptr<DirHandle>> dirs;
  {
    absl::MutexLock lock(&handles_mu_);
    files.swap(files_);
    dirs.swap(dirs_);
  }
  for (auto& [fh, file] : files) {
    absl::Status status = file->Close();
    if (!status.ok()) {
      CKPTFS_LOG(kError) << "closing unreleased file ino " << file->ino()
                         << " at shutdown: " << status;
    }
  }
  files.clear();  // every File goes before the Client (Client's contract)
  client_.reset();
}

const fuse_lowlevel_ops& Filesystem::Ops() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o{};
    o.init = InitOp;
    AddNamespaceOps(&o);
    AddFileOps(&o);
    AddDirOps(&o);
    AddXattrOps(&o);
    WrapWithMetrics(&o);
    return o;
  }();
  return ops;
}

namespace {

// libfuse splices a request only through a pipe that holds the largest
// one (max_write plus a page for the header) and otherwise reads it with
// read(2), silently. Pipes above /proc/sys/fs/pipe-max-size (1 MiB by
// default) need CAP_SYS_RESOURCE, which containers often drop: say so,
// rather than let --splice measure as the plain path.
void WarnIfPipesCannotHold(uint32_t max_write) {
  const size_t needed = size_t{max_write} + 4096;
  int fds[2];
  if (::pipe(fds) != 0) return;
  const bool grown = ::fcntl(fds[0], F_SETPIPE_SZ, static_cast<int>(needed)) >= 0;
  const int err = errno;
  ::close(fds[0]);
  ::close(fds[1]);
  if (!grown) {
    CKPTFS_LOG(kWarning) << "--splice has no effect: a pipe cannot grow to " << needed << " bytes ("
                         << std::strerror(err)
                         << "; raise /proc/sys/fs/pipe-max-size or run with CAP_SYS_RESOURCE), "
                            "so libfuse reads every request without splice";
  }
}

}  // namespace

void Filesystem::Init(struct fuse_conn_info* conn) {
  // libfuse has already lowered max_write to what its receive buffer holds;
  // never raise it past that, or the kernel would send requests libfuse
  // cannot read.
  const uint32_t ceiling = conn->max_write;
  conn->max_write = std::min(ceiling, kMaxWrite);
  if (conn->max_write < kMaxWrite) {
    CKPTFS_LOG(kWarning) << "libfuse caps max_write at " << ceiling << " bytes, below the "
                         << kMaxWrite << " ckptfs asks for";
  }

  auto want_if_offered = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want_if_offered(FUSE_CAP_ASYNC_READ);
  // O_TRUNC arrives with open, so the client trims storage and records the
  // size in one step instead of a separate setattr.
  want_if_offered(FUSE_CAP_ATOMIC_O_TRUNC);
  // Many ranks create files in one checkpoint directory at once.
  want_if_offered(FUSE_CAP_PARALLEL_DIROPS);
  // A large direct write is sent as several max_write requests in parallel.
  want_if_offered(FUSE_CAP_ASYNC_DIO);
  // A symlink's target never changes once created.
  want_if_offered(FUSE_CAP_CACHE_SYMLINKS);
  // Writeback cache, splice and auto-invalidation only when asked for
  // (FilesystemOptions says why they are off by default). No splice move:
  // the kernel no longer moves pages into a FUSE file's cache. No
  // readdirplus: ReadDir carries no attributes. Locks stay local to the
  // kernel.
  // No HANDLE_KILLPRIV: the kernel itself clears the set-user-ID and
  // set-group-ID bits on a truncate or chown, and on a write through the
  // page cache, with a SETATTR of the mode (libfuse 3.14 cannot show the
  // filesystem the kill flag of a write); direct_io writes are the mount's
  // (ops_file.cc).
  conn->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
                  FUSE_CAP_SPLICE_MOVE | FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO |
                  FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_AUTO_INVAL_DATA |
                  FUSE_CAP_HANDLE_KILLPRIV);
  // libfuse asks for AUTO_INVAL_DATA by default: only when the options say
  // (a GETATTR before every read otherwise; FilesystemOptions says why).
  if (options_.auto_inval_data) want_if_offered(FUSE_CAP_AUTO_INVAL_DATA);
  if (options_.writeback_cache) want_if_offered(FUSE_CAP_WRITEBACK_CACHE);
  if (options_.splice) {
    want_if_offered(FUSE_CAP_SPLICE_READ);
    want_if_offered(FUSE_CAP_SPLICE_WRITE);
    WarnIfPipesCannotHold(conn->max_write);
  }
  if (options_.direct_io_reads && options_.writeback_cache) {
    CKPTFS_LOG(kInfo) << "--writeback_cache: no open uses direct_io, --direct_io_reads included";
  } else if (options_.direct_io_reads) {
    if (init_extensions_.KernelOffersDirectIoAllowMmap()) {
      init_extensions_.AskForDirectIoAllowMmap();
    } else {
      CKPTFS_LOG(kInfo) << "the kernel cannot keep direct_io files mmap-able with MAP_SHARED "
                           "(FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6): read-only opens use the "
                           "page cache";
    }
  }
  conn->max_background = options_.max_background;
  conn->congestion_threshold = options_.max_background * 3 / 4;
  conn->time_gran = 1;

  max_write_.store(conn->max_write);
  CKPTFS_LOG(kInfo) << "FUSE protocol " << conn->proto_major << "." << conn->proto_minor
                    << ": max_write=" << conn->max_write << " max_read=" << conn->max_read
                    << " max_readahead=" << conn->max_readahead
                    << " max_background=" << conn->max_background << " want=0x" << std::hex
                    << conn->want << " capable=0x" << conn->capable;
}

uint64_t Filesystem::AddFile(std::unique_ptr<client::File> file) {
  const uint64_t fh = reinterpret_cast<uint64_t>(file.get());
  absl::MutexLock lock(&handles_mu_);
  files_.emplace(fh, std::move(file));
  return fh;
}

std::unique_ptr<client::File> Filesystem::TakeFile(uint64_t fh) {
  absl::MutexLock lock(&handles_mu_);
  auto it = files_.find(fh);
  if (it == files_.end()) return nullptr;
  std::unique_ptr<client::File> file = std::move(it->second);
  files_.erase(it);
  return file;
}

uint64_t Filesystem::AddDir(std::unique_ptr<DirHandle> dir) {
  const uint64_t fh = reinterpret_cast<uint64_t>(dir.get());
  absl::MutexLock lock(&handles_mu_);
  dirs_.emplace(fh, std::move(dir));
  return fh;
}

std::unique_ptr<DirHandle> Filesystem::TakeDir(uint64_t fh) {
  absl::MutexLock lock(&handles_mu_);
  auto it = dirs_.find(fh);
  if (it == dirs_.end()) return nullptr;
  std::unique_ptr<DirHandle> dir = std::move(it->second);
  dirs_.erase(it);
  return dir;
}

}  // namespace ckptfs::fuse
