// InodeAllocator: hands out inode numbers that are never reused.
//
// The persistent counter c/next_ino is advanced a batch at a time in its own
// transaction, and numbers from the reserved batch are handed out from
// memory. Creates therefore never conflict on the counter; a crash only skips
// the unused rest of a batch (numbers are never reused, gaps are harmless).
// Several metadata servers sharing one store each reserve their own batches.
// Root is inode 1; the first allocated number is 2.
//
// Thread-safety: thread-safe. `kv` is borrowed and must outlive this.
#ifndef CKPTFS_SERVER_META_INODE_ALLOCATOR_H_
#define CKPTFS_SERVER_META_INODE_ALLOCATOR_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/meta/kv_store.h"

namespace ckptfs::meta {

class InodeAllocator {
 public:
  explicit InodeAllocator(KvStore* kv, uint64_t batch = 1024) : kv_(kv), batch_(batch) {}

  // A fresh inode number (>= 2), unique across restarts.
  absl::StatusOr<uint64_t> Allocate();

 private:
  KvStore* const kv_;
  const uint64_t batch_;
  absl::Mutex mu_;  // leaf lock; held across the reserving commit
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t end_ ABSL_GUARDED_BY(mu_) = 0;  // next_ == end_: batch used up
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_INODE_ALLOCATOR_H_
