// See init_extensions.h. The FUSE wire layouts come from the kernel's own
// header (<linux/fuse.h>), not from libfuse, whose copy predates the flag.
#include "fuse/init_extensions.h"

#include <linux/fuse.h>

#include <cstddef>
#include <cstring>

#include "common/log.h"

namespace ckptfs::fuse {
namespace {

// Protocol 7.39's flag (Linux 6.6), bit 36 of the 64-bit INIT flags: the
// kernel's own header names it only from Linux 6.6 on, Debian 12's is 6.1.
constexpr uint64_t kDirectIoAllowMmap = uint64_t{1} << 36;
constexpr uint32_t kDirectIoAllowMmapFlags2 = static_cast<uint32_t>(kDirectIoAllowMmap >> 32);

// Copies `n` bytes at byte `offset` of the reply payload (the buffers after
// the header) into or out of `value`. False when the payload is shorter.
bool AccessPayload(struct iovec* iov, int count, size_t offset, void* value, size_t n, bool write) {
  size_t skipped = 0;
  for (int i = 1; i < count; ++i) {
    const size_t len = iov[i].iov_len;
    if (offset >= skipped + len) {
      skipped += len;
      continue;
    }
    // Flags are 4-byte aligned fields; libfuse hands the whole struct in one
    // buffer, so a field split across buffers is not expected: refuse it.
    if (offset - skipped + n > len) return false;
    char* field = static_cast<char*>(iov[i].iov_base) + (offset - skipped);
    if (write) {
      std::memcpy(field, value, n);
    } else {
      std::memcpy(value, field, n);
    }
    return true;
  }
  return false;
}

}  // namespace

void InitExtensions::OnRequest(const void* buf, size_t len) {
  if (len < sizeof(fuse_in_header)) return;
  fuse_in_header header;
  std::memcpy(&header, buf, sizeof(header));
  if (header.opcode != FUSE_INIT) return;
  // fuse_init_in up to and including flags2 (present from protocol 7.36).
  constexpr size_t kFlags2End = offsetof(fuse_init_in, flags2) + sizeof(uint32_t);
  if (len >= sizeof(fuse_in_header) + kFlags2End) {
    fuse_init_in in;
    std::memcpy(&in, static_cast<const char*>(buf) + sizeof(fuse_in_header), kFlags2End);
    const bool extended = (in.flags & FUSE_INIT_EXT) != 0;
    offered_.store(extended && (in.flags2 & kDirectIoAllowMmapFlags2) != 0);
  }
  init_unique_.store(header.unique);
}

void InitExtensions::OnReply(struct iovec* iov, int count) {
  if (!asked_.load() || !offered_.load() || sent_.load() || count < 1 ||
      iov[0].iov_len < sizeof(fuse_out_header)) {
    return;
  }
  fuse_out_header header;
  std::memcpy(&header, iov[0].iov_base, sizeof(header));
  const uint64_t init_unique = init_unique_.load();
  if (init_unique == 0 || header.unique != init_unique || header.error != 0) return;
  uint32_t flags = 0;
  uint32_t flags2 = 0;
  if (!AccessPayload(iov, count, offsetof(fuse_init_out, flags), &flags, sizeof(flags), false) ||
      !AccessPayload(iov, count, offsetof(fuse_init_out, flags2), &flags2, sizeof(flags2), false)) {
    // Not expected from libfuse 3.14; the mount then keeps reads cached
    // (Filesystem::direct_io_reads asks DirectIoAllowMmapSent).
    CKPTFS_LOG(kWarning) << "the INIT reply has no room for FUSE_DIRECT_IO_ALLOW_MMAP; "
                            "read-only opens use the page cache";
    return;
  }
  // flags2 counts only with FUSE_INIT_EXT, which libfuse sets whenever the
  // kernel's INIT had it, and the kernel had it if it offered the flag.
  flags |= FUSE_INIT_EXT;
  flags2 |= kDirectIoAllowMmapFlags2;
  AccessPayload(iov, count, offsetof(fuse_init_out, flags), &flags, sizeof(flags), true);
  AccessPayload(iov, count, offsetof(fuse_init_out, flags2), &flags2, sizeof(flags2), true);
  sent_.store(true);
  CKPTFS_LOG(kInfo) << "INIT reply asks the kernel to keep direct_io files mmap-able "
                       "(FUSE_DIRECT_IO_ALLOW_MMAP): read-only opens bypass the page cache";
}

}  // namespace ckptfs::fuse
