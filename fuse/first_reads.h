// FirstReads: which read-only opens of a mount with direct reads bypass
// the page cache. The first open of each version of a file does (FUSE
// direct_io): a rank loading its own shard reads it once, so its bytes go
// from the mount's chunk buffers straight into the reader's buffer, with
// no page-cache pages to allocate and fill. Every later open of that same
// version uses the page cache: a file read twice through one mount is a
// file the node's ranks share (a broadcast load, a DCP .metadata), and
// PageCacheVersions then keeps its pages across opens, so the third and
// later readers find it in memory. Ranks that open a shared file together
// also share the mount's read cache (OpenFileState), so the first, direct
// reader and the cached ones fetch each chunk once.
//
// A version is the file's attributes at open (client::FileVersion), so a
// rewritten file is new again. The first direct open of a version drops any
// pages the kernel holds of the file, which close-to-open needs anyway.
//
// Memory: at most kMaxFiles files; past that the table starts over (the
// next open of each file is then direct once more).
//
// Thread-safety: thread-safe.
#ifndef CKPTFS_FUSE_FIRST_READS_H_
#define CKPTFS_FUSE_FIRST_READS_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "client/file.h"

namespace ckptfs::fuse {

class FirstReads {
 public:
  static constexpr size_t kMaxFiles = 1 << 16;

  // A read-only open of `ino` whose attributes the service gave as
  // `version`: true if it is the first open of that version here (it
  // bypasses the page cache), and it is recorded; false if an earlier open
  // read that version (this one uses the page cache).
  bool IsFirst(uint64_t ino, const client::FileVersion& version);

  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, client::FileVersion> opened_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_FIRST_READS_H_
