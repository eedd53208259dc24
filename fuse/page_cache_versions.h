// PageCacheVersions: which version of each file the kernel's page cache of
// this mount may hold, so that a read-only open of a file nobody changed
// keeps the pages earlier opens read (FOPEN_KEEP_CACHE) instead of dropping
// them.
//
// Close-to-open needs every open to see the newest committed data. An open
// always asks the metadata service for the file's attributes; when they
// equal those of the open that last let the pages be filled (size, mtime and
// the service-set ctime, which every commit and truncate changes), no close
// happened in between and the pages are current. Otherwise the kernel drops
// them (keep_cache off) and the new version is recorded. The kernel's drop
// waits for reads in flight, so no page read before it survives it.
//
// This is what makes a broadcast load (every rank of a node reading one
// shard) read the shard once per node instead of once per rank.
//
// Memory: at most kMaxFiles entries; past that the table starts over (the
// next open of each file then drops its pages once).
//
// Thread-safety: thread-safe.
#ifndef CKPTFS_FUSE_PAGE_CACHE_VERSIONS_H_
#define CKPTFS_FUSE_PAGE_CACHE_VERSIONS_H_

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

  // A read-only open of `ino`, whose attributes the service gave as
  // `version`: true if the kernel may keep the pages it holds of the file.
  // False for the first open of the file here and after any change; the
  // caller then has the kernel drop them, and `version` is remembered.
  bool KeepOnOpen(uint64_t ino, const client::FileVersion& version);

  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, client::FileVersion> versions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_PAGE_CACHE_VERSIONS_H_
