// See inode_allocator.h.
#include "server/meta/inode_allocator.h"

#include <cerrno>

#include "common/errno_status.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"

namespace ckptfs::meta {

absl::StatusOr<uint64_t> InodeAllocator::Allocate() {
  absl::MutexLock lock(&mu_);
  if (next_ == end_) {
    absl::StatusOr<uint64_t> start = RunTxn<uint64_t>(
        kv_, "reserve inode numbers", [&](MetaTxn& txn) -> absl::StatusOr<uint64_t> {
          absl::StatusOr<std::optional<std::string>> stored = txn.Get(kNextInoKey);
          if (!stored.ok()) return stored.status();
          uint64_t first = kRootIno + 1;
          if (stored->has_value()) {
            std::optional<uint64_t> decoded = DecodeU64(**stored);
            if (!decoded.has_value()) return ErrnoStatus(EIO, "corrupt inode counter");
            first = *decoded;
          }
          txn.PutRaw(kNextInoKey, EncodeU64(first + batch_));
          // Durable even without --sync_commits: a reservation lost to a
          // power cut would hand out numbers again whose old chunks still
          // sit on the storage servers (their holes would show old data).
          // One fsync per batch of inodes.
          txn.RequireDurable();
          return first;
        });
    if (!start.ok()) return start.status();
    next_ = *start;
    end_ = *start + batch_;
  }
  return next_++;
}

}  // namespace ckptfs::meta
