// InitExtensions: FUSE INIT flags that the running kernel offers but
// libfuse 3.14 (Debian 12's) cannot ask for, added to libfuse's INIT reply
// on its way to the kernel.
//
// The one flag today is FUSE_DIRECT_IO_ALLOW_MMAP (protocol 7.39, Linux
// 6.6): files opened with direct_io stay mmap-able with MAP_SHARED. Without
// it the kernel refuses a MAP_SHARED mmap of a direct_io file with ENODEV,
// which is why read-only opens could only bypass the page cache at the
// price of breaking safetensors and numpy.memmap. libfuse learned the flag
// in 3.16; here the mount's custom I/O hooks (fuse/mount.cc) show every
// request read from /dev/fuse to OnRequest and every reply written to it to
// OnReply, and only the INIT pair is looked at.
//
// Sequence: the kernel's INIT request reaches OnRequest before libfuse
// calls the filesystem's init (Filesystem::Init), which may then call
// AskForDirectIoAllowMmap; libfuse's reply then passes through OnReply,
// which sets the flag in it. The kernel sends no other request before that
// reply, so what Init decided holds for every open.
//
// Thread-safety: every method may be called from any FUSE worker thread.
#ifndef CKPTFS_FUSE_INIT_EXTENSIONS_H_
#define CKPTFS_FUSE_INIT_EXTENSIONS_H_

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ckptfs::fuse {

class InitExtensions {
 public:
  // Looks at one request as read from /dev/fuse (`len` bytes at `buf`):
  // remembers an INIT's unique id and whether it offers allow-mmap.
  void OnRequest(const void* buf, size_t len);

  // Whether the kernel's INIT offered FUSE_DIRECT_IO_ALLOW_MMAP (false
  // before the INIT request, and on kernels before 6.6).
  bool KernelOffersDirectIoAllowMmap() const { return offered_.load(); }

  // Asks for FUSE_DIRECT_IO_ALLOW_MMAP in the INIT reply. REQUIRES:
  // KernelOffersDirectIoAllowMmap(), called before the INIT reply is sent.
  void AskForDirectIoAllowMmap() { asked_.store(true); }

  // Looks at one reply about to be written to /dev/fuse (`count` buffers,
  // the first the fuse_out_header): if it is the INIT reply and the flag
  // was offered and asked for, sets it in the reply's flags2. Any other
  // reply, or an INIT reply too short to carry flags2 (logged), is left as
  // it is.
  void OnReply(struct iovec* iov, int count);

  // Whether the flag was set in the INIT reply (just before libfuse writes
  // it; a reply the kernel refused ends the session anyway).
  bool DirectIoAllowMmapSent() const { return sent_.load(); }

 private:
  // The unique id of the INIT request (0: none seen).
  std::atomic<uint64_t> init_unique_{0};
  std::atomic<bool> offered_{false};
  std::atomic<bool> asked_{false};
  std::atomic<bool> sent_{false};
};

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_INIT_EXTENSIONS_H_
