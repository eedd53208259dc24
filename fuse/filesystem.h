// Filesystem: the state every FUSE operation of a ckptfs mount works on.
//
// It owns the libckptfs Client and the mount's options, and it is the
// session's userdata: each operation finds it with FsOf(req) (reply.h), so
// nothing lives in globals. It also keeps the open file and directory
// handles handed to the kernel (fi->fh), so that whatever the kernel never
// released (an exit on a signal) is closed before the Client goes away.
//
// FUSE inode numbers are ckptfs inode numbers (allocated by the metadata
// service, never reused, root = 1), so there is no inode table and forget
// has nothing to do.
//
// Thread-safety: every method may be called from any FUSE worker thread
// concurrently, except the constructor and destructor.
#ifndef CKPTFS_FUSE_FILESYSTEM_H_
#define CKPTFS_FUSE_FILESYSTEM_H_

#include <fuse_lowlevel.h>  // FUSE_USE_VERSION comes from fuse/CMakeLists.txt

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/file.h"
#include "fuse/dir_handle.h"
#include "fuse/first_reads.h"
#include "fuse/init_extensions.h"
#include "fuse/page_cache_versions.h"
#include "fuse/setid_clearing.h"

namespace ckptfs::fuse {

// The largest write the kernel is asked to send in one request (and the
// largest read). libfuse 3.14's receive buffer holds 256 pages plus a
// header, so 1 MiB is its ceiling.
inline constexpr uint32_t kMaxWrite = 1u << 20;

struct FilesystemOptions {
  // How long the kernel may cache attributes and name lookups. Both default
  // to 0: another mount's close() must be visible at the next open() here
  // (close-to-open across nodes), and a size or an entry cached by the
  // kernel would hide it. Raise them only for read-mostly mounts.
  absl::Duration attr_timeout = absl::ZeroDuration();
  absl::Duration entry_timeout = absl::ZeroDuration();
  // The same for directories only (the larger of the two applies to them):
  // how long a directory's name and attributes may be reused without
  // asking the metadata service. Close-to-open concerns files, whose
  // timeouts stay as above; a cached directory saves the LOOKUP and GETATTR
  // of every path component of every open() (most of a storm's metadata
  // requests). Another mount's rmdir, rename or chmod of a directory, and
  // the server's removal of a checkpoint (retention), are then seen by
  // stat() here only after up to this long; a directory removed and
  // recreated under its name is found at once, and nothing is created in
  // a removed one, because operations in a removed directory answer ESTALE
  // and the kernel then walks the path again, revalidating each component.
  // 0 by default: stat() of a directory is exact, as with the other two.
  absl::Duration dir_timeout = absl::ZeroDuration();

  // Data-path modes (each measured, docs/tuning.md; the defaults are the
  // fastest):
  // Write-only opens bypass the page cache (direct_io): a writer's payload
  // goes from its buffer to the client's chunk buffer without filling the
  // page cache, which on fresh memory is the slowest step of a save.
  bool direct_io_writes = true;
  // The first read-only open of each version of a file bypasses the page
  // cache too (direct_io; later opens of that version share the page
  // cache: FirstReads): a rank loading its own shard gets each byte copied
  // from the client's chunk buffers straight into its buffer, instead of
  // into page-cache pages that the kernel must first allocate and then
  // copy out again. That halves the CPU per GiB of such loads, and over
  // TCP they ran twice as fast (docs/tuning.md). Only where the kernel
  // keeps direct_io files mmap-able with MAP_SHARED
  // (FUSE_DIRECT_IO_ALLOW_MMAP, Linux 6.6; InitExtensions asks for it):
  // elsewhere read-only opens stay cached, since safetensors and
  // numpy.memmap map files MAP_SHARED. The cost: each read(2) of a
  // direct open is a FUSE request, so small unbuffered reads of a file's
  // first reader are slower than through the page cache's read-ahead, and
  // a file read by two opens that do not overlap is fetched twice.
  bool direct_io_reads = true;
  // The kernel's writeback cache: writes land in the page cache and are
  // sent in the background (then no open uses direct_io).
  bool writeback_cache = false;
  // Splice the kernel's requests through a pipe (FUSE_CAP_SPLICE_READ and
  // _WRITE): a write's payload is read from the pipe straight into the
  // chunk buffer.
  bool splice = false;
  // Background requests (readahead, async direct I/O pieces) the kernel
  // may have in flight at once. The kernel default, 12, starves a striped
  // filesystem whose chunk requests go to many servers in parallel.
  unsigned max_background = 64;
  // FUSE_CAP_AUTO_INVAL_DATA: the kernel asks for the attributes before
  // every read (with attr_timeout 0 that is a metadata RPC per read() call)
  // and drops the file's cached pages when mtime or size changed. Off by
  // default: close-to-open does not need it (every open looks the
  // attributes up afresh and drops the cached pages unless they show no
  // change since an earlier drop was done: PageCacheVersions; a read past
  // the cached size still asks), and on a load storm that RPC per 1 MiB
  // read was most of the metadata service's work and a wait in front of
  // every read.
  // On: a handle held open also sees another mount's in-place rewrites.
  bool auto_inval_data = false;
};

class Filesystem {
 public:
  // REQUIRES: client != nullptr.
  Filesystem(std::unique_ptr<client::Client> client, FilesystemOptions options);
  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;
  // Closes every file handle the kernel did not release, then the Client.
  ~Filesystem();

  // The operation table; the session's userdata must be this Filesystem.
  static const fuse_lowlevel_ops& Ops();

  client::Client& client() { return *client_; }
  // Attribute and entry timeouts (seconds) for a reply about an inode of
  // type `attr.type()`: a directory gets dir_timeout when that is longer.
  double AttrTimeoutFor(const meta::Attr& attr) const;
  double EntryTimeoutFor(const meta::Attr& attr) const;
  const FilesystemOptions& options() const { return options_; }
  // Which version of each file the kernel's page cache may hold (open).
  PageCacheVersions& page_cache_versions() { return page_cache_versions_; }
  FirstReads& first_reads() { return first_reads_; }
  // Handles whose first unprivileged direct_io write clears set-id bits.
  SetIdClearing& setid_clearing() { return setid_clearing_; }
  // The INIT flags added past libfuse (the mount's I/O hooks feed it).
  InitExtensions& init_extensions() { return init_extensions_; }
  // Whether read-only opens get direct_io: the INIT reply asked the kernel
  // to keep such files mmap-able, which Init has it do only when the
  // options want direct reads and the kernel offered (settled before the
  // kernel sends any open).
  bool direct_io_reads() const { return init_extensions_.DirectIoAllowMmapSent(); }

  // FUSE_INIT: chooses the features this mount uses among those the kernel
  // offers, sets max_write, and logs what was negotiated.
  void Init(struct fuse_conn_info* conn);
  // max_write agreed with the kernel (0 before Init).
  uint32_t max_write() const { return max_write_.load(); }

  // --- Handles: fi->fh values ---------------------------------------------
  // Takes ownership of an open file; returns the fh for the kernel.
  uint64_t AddFile(std::unique_ptr<client::File> file);
  // The file behind `fh`. REQUIRES: fh came from AddFile and is not released.
  static client::File& FileOf(uint64_t fh) { return *reinterpret_cast<client::File*>(fh); }
  // Gives back ownership of the file behind `fh` (release).
  std::unique_ptr<client::File> TakeFile(uint64_t fh);

  uint64_t AddDir(std::unique_ptr<DirHandle> dir);
  static DirHandle& DirOf(uint64_t fh) { return *reinterpret_cast<DirHandle*>(fh); }
  std::unique_ptr<DirHandle> TakeDir(uint64_t fh);

 private:
  std::unique_ptr<client::Client> client_;
  const FilesystemOptions options_;
  const double attr_timeout_s_;
  const double entry_timeout_s_;
  const double dir_timeout_s_;
  std::atomic<uint32_t> max_write_{0};
  PageCacheVersions page_cache_versions_;
  FirstReads first_reads_;
  SetIdClearing setid_clearing_;
  InitExtensions init_extensions_;

  // Lock order: leaf (never held across a client call or a fuse_reply_*).
  absl::Mutex handles_mu_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<client::File>> files_ ABSL_GUARDED_BY(handles_mu_);
  absl::flat_hash_map<uint64_t, std::unique_ptr<DirHandle>> dirs_ ABSL_GUARDED_BY(handles_mu_);
};

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_FILESYSTEM_H_
