// SetIdClearing: which open handles still owe their file the clearing of
// its set-user-ID and set-group-ID bits that POSIX asks of a write by an
// unprivileged process.
//
// The kernel clears the bits itself on a truncate, a chown and a write
// through the page cache (the mount does not ask for FUSE's
// HANDLE_KILLPRIV), but a direct_io write it leaves to the filesystem,
// flagged in the request where libfuse 3.14 does not show it. So the mount
// arms a handle at open when it writes with direct_io and the file's mode
// then had bits to clear (ModeAfterUnprivilegedWrite differs); the first
// write through it by a caller other than root disarms it and has the
// service clear them (SetAttr KILL_SETID, from the mode the file has by
// then). A set-id bit set again after that write, through another handle,
// stays until a write through a handle opened later — where Linux would
// clear it at every write.
//
// Thread-safety: thread-safe. Writes of handles not armed cost one atomic
// load.
#ifndef CKPTFS_FUSE_SETID_CLEARING_H_
#define CKPTFS_FUSE_SETID_CLEARING_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace ckptfs::fuse {

class SetIdClearing {
 public:
  // Handle `fh` owes its file the clearing.
  void Arm(uint64_t fh) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `fh` was armed; disarms it. One caller gets true.
  bool Disarm(uint64_t fh) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::atomic<uint64_t> armed_count_{0};
  absl::Mutex mu_;
  absl::flat_hash_set<uint64_t> armed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_SETID_CLEARING_H_
