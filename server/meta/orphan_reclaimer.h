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
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/data_connection.h"
#include "server/meta/membership.h"
#include "server/meta/namespace.h"

namespace ckptfs::meta {

class OrphanReclaimer {
 public:
  struct Options {
    absl::Duration interval = absl::Seconds(5);    // between passes
    absl::Duration io_timeout = absl::Seconds(5);  // connect and each TRIM
    size_t batch = 256;                            // orphans read per page; a pass walks every page
    // At most one warning per unreachable server per this period.
    absl::Duration warn_interval = absl::Minutes(1);
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
  // Starts the next pass now instead of at the end of the interval (orphans
  // due at once were made: an aborted or removed checkpoint). Any thread.
  void Wake();

  // One pass over every due orphan: reclaims all it can and returns how many
  // it dropped. Orphans blocked by a down server do not hold up the others.
  // Returns early (OK) once Stop() is called.
  absl::StatusOr<size_t> RunOnce();

 private:
  // What one pass keeps: connections it opened, and servers that failed in
  // it (not tried again until the next pass).
  struct Pass {
    std::map<uint32_t, std::unique_ptr<DataConnection>> connections;
    std::set<uint32_t> failed;
  };

  void Loop();
  bool Stopping();
  // A connection to `server_id` (reused within the pass); nullptr for an id
  // that was never registered.
  absl::StatusOr<DataConnection*> ConnectionTo(uint32_t server_id, Pass& pass);
  // TRIMs `orphan` to size 0 on every server of its stripe; false if any
  // server was unreachable or failed.
  bool TrimOnStripe(const Namespace::DueOrphan& orphan, Pass& pass);
  // Logs `what` about `server_id` unless it was logged within warn_interval.
  void WarnAboutServer(uint32_t server_id, const std::string& what);

  Namespace* const ns_;
  Membership* const membership_;
  const Options options_;
  std::thread thread_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  // Used only by the thread running RunOnce.
  std::map<uint32_t, absl::Time> last_warning_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_ORPHAN_RECLAIMER_H_
