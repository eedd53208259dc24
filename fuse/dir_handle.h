// DirHandle: the state behind one opendir(3) of a ckptfs directory.
//
// FUSE readdir resumes at an offset the kernel hands back. The handle keeps
// every entry it has fetched, so offset N always names the same entry for
// the life of the handle (stable offsets even when the directory changes
// meanwhile, and seekdir/telldir work), and it fetches pages from the
// metadata service lazily, one page when the kernel asks past what it has.
// Offsets: 0 is ".", 1 is "..", 2 + i is the i-th entry in name order.
//
// The fetcher is injected so the paging is testable without a service
// (tests/fuse/dir_handle_test.cc); Filesystem binds it to Client::ReadDir.
//
// Thread-safety: At() may be called concurrently. No lock is held while the
// fetcher runs (an RPC); a page that arrives after another thread already
// appended the same range is dropped.
#ifndef CKPTFS_FUSE_DIR_HANDLE_H_
#define CKPTFS_FUSE_DIR_HANDLE_H_

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "proto/meta.pb.h"

namespace ckptfs::fuse {

class DirHandle {
 public:
  // One page of the directory's entries after `start_after` ("" = from the
  // beginning) in bytewise name order.
  using Fetcher = std::function<absl::StatusOr<meta::ReadDirReply>(absl::string_view start_after)>;

  struct Entry {
    std::string name;
    uint64_t ino = 0;
    mode_t type = 0;  // S_IFDIR, S_IFREG, S_IFLNK (d_type source)
  };

  // `ino` is the directory; `parent_ino` is what ".." reports.
  DirHandle(uint64_t ino, uint64_t parent_ino, Fetcher fetcher);
  DirHandle(const DirHandle&) = delete;
  DirHandle& operator=(const DirHandle&) = delete;

  uint64_t ino() const { return ino_; }

  // The entry at `offset`, fetching pages until it is known; nullptr past
  // the last entry. The pointer stays valid for the life of the handle.
  // Errors are the fetcher's.
  absl::StatusOr<const Entry*> At(uint64_t offset);

 private:
  const uint64_t ino_;
  const Fetcher fetcher_;

  absl::Mutex mu_;
  // A deque: push_back keeps references to earlier entries valid.
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::string last_name_ ABSL_GUARDED_BY(mu_);  // start_after of the next page
  bool complete_ ABSL_GUARDED_BY(mu_) = false;  // every entry fetched
};

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_DIR_HANDLE_H_
