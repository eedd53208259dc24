// PageCacheVersions: which version of each file the kernel's page cache of
// this mount may hold, so that a read-only open of a file nobody changed
// keeps the pages earlier opens read (FOPEN_KEEP_CACHE) instead of dropping
// them.
//
// Close-to-open needs every open to see the newest committed data. An open
// always asks the metadata service for the file's attributes (size, mtime
// and the service-set ctime, which every commit and truncate changes). The
// kernel may keep its pages only when those equal the version whose older
// pages are known to be gone:
//
//   1. An open that meets a version not yet known to be clean answers
//      keep_cache=0, so the kernel drops the inode's pages in that opener's
//      open(2), after our reply. The handle is then "dropping" the version.
//   2. The drop is known to be done once the kernel sends anything on that
//      handle: its first READ, or its RELEASE (the fd existed, so open(2)
//      got past the drop). Only then is the version "clean". (Kernels from
//      6.9 also send RELEASE for an open that failed after our reply,
//      before the drop; that needs passthrough or io-mode conflicts, which
//      ckptfs does not use.)
//   3. Opens of a clean version answer keep_cache=1. Opens that come while
//      the version is still being dropped answer keep_cache=0 themselves:
//      they cannot rely on another opener's drop having happened yet.
//
// A reply that never reached the kernel (an interrupted open) dropped
// nothing: Abandon forgets the handle without making the version clean.
// The kernel's drop waits for reads in flight, so no page read before it
// survives it.
//
// This is what makes a broadcast load (every rank of a node reading one
// shard) read the shard once per node instead of once per rank.
//
// Memory: at most kMaxFiles versions; past that the table starts over (the
// next open of each file then drops its pages once). Dropping handles: one
// entry per open handle at most, gone at its first READ or RELEASE.
//
// Thread-safety: thread-safe. OnHandleUsed is on the READ path: it takes
// no lock while no handle is dropping, and a shared one otherwise (a handle
// opened and never read keeps that so until its release).
#ifndef CKPTFS_FUSE_PAGE_CACHE_VERSIONS_H_
#define CKPTFS_FUSE_PAGE_CACHE_VERSIONS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "client/file.h"

namespace ckptfs::fuse {

class PageCacheVersions {
 public:
  static constexpr size_t kMaxFiles = 1 << 16;

  // A read-only open of `ino` as handle `fh`, whose attributes the service
  // gave as `version`: true if the kernel may keep the pages it holds of
  // the file. False otherwise: the caller answers keep_cache=0, and `fh`
  // is dropping `version` until OnHandleUsed or Abandon.
  // REQUIRES: fh is not dropping already.
  bool KeepOnOpen(uint64_t ino, const client::FileVersion& version, uint64_t fh);

  // The kernel sent a READ or RELEASE on `fh`: if it was dropping a
  // version that is still the newest here, that version is now clean.
  void OnHandleUsed(uint64_t fh);

  // The open reply for `fh` never reached the kernel: forgets it.
  void Abandon(uint64_t fh);

  // Files with a version recorded; handles dropping one.
  size_t size() const;
  size_t dropping() const;

 private:
  struct Entry {
    client::FileVersion version;
    bool clean = false;
  };
  struct Dropping {
    uint64_t ino = 0;
    client::FileVersion version;
  };

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> versions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Dropping> dropping_ ABSL_GUARDED_BY(mu_);
  // dropping_.size(), readable without the lock.
  std::atomic<size_t> dropping_count_{0};
};

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_PAGE_CACHE_VERSIONS_H_
