// OrphanReclaimer: the background thread that frees the chunks of files
// whose last name is gone, once their grace period has passed.
//
// For each due orphan (Namespace::DueOrphans) it sends TRIM with trim_size 0
// to every storage server of the file's stripe (common/data_connection.h,
// addresses from the server records), and only when all of them succeeded
// drops the orphan and its inode. A server that is down or fails leaves the
// orphan for a later pass. A stripe id with no server record at all (never
// registered) has nothing to trim and counts as done.
//
// Thread-safety: Start/Stop from the owning thread; RunOnce may be called
// from any one thread at a time (the background thread, or a test with the
// thread not started). Namespace and Membership are borrowed.
#ifndef CKPTFS_SERVER_META_ORPHAN_RECLAIMER_H_
#define CKPTFS_SERVER_META_ORPHAN_RECLAIMER_H_

#include <cstddef>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/meta/membership.h"
#include "server/meta/namespace.h"

namespace ckptfs::meta {

class OrphanReclaimer {
 public:
  struct Options {
    absl::Duration interval = absl::Seconds(5);  // between passes
    absl::Duration io_timeout = absl::Seconds(5);  // connect and each TRIM
    size_t batch = 256;  // orphans per pass
  };

  OrphanReclaimer(Namespace* ns, Membership* membership, const Options& options)
      : ns_(ns), membership_(membership), options_(options) {}
  OrphanReclaimer(const OrphanReclaimer&) = delete;
  OrphanReclaimer& operator=(const OrphanReclaimer&) = delete;
  ~OrphanReclaimer() { Stop(); }

  // Starts the background thread (a pass every `interval`). Call once.
  void Start();
  // Stops and joins the thread; idempotent. A pass in progress finishes its
  // current TRIM first (bounded by io_timeout).
  void Stop();

  // One pass: reclaims every due orphan it can (up to `batch`) and returns
  // how many it dropped.
  absl::StatusOr<size_t> RunOnce();

 private:
  void Loop();

  Namespace* const ns_;
  Membership* const membership_;
  const Options options_;
  std::thread thread_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_ORPHAN_RECLAIMER_H_
