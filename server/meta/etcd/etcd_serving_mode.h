// How the metadata servers of one etcd prefix serve it, and the guard that
// keeps the two ways from mixing.
//
// Exclusive (the default): one server holds the prefix's EtcdServerLock and
// serves; others wait as standbys. Shared (--etcd_shared): every server
// serves; the lock only guards the once-per-cluster duties. An exclusive
// server assumes it is alone (it decides commit barriers from its own
// arrivals and fences every write with its lock), so a shared server beside
// it would break both: a barrier counted twice or never, duties run twice.
// So they refuse to start beside each other:
//   - a shared server holds a presence key "<prefix without '/'>.shared/
//     <holder>" on a lease of its own for as long as it runs, and holds the
//     duty lock under a name tagged as shared (SharedHolderName);
//   - an exclusive server refuses when a presence key exists (before it
//     waits for the lock, and again once it holds it);
//   - a shared server refuses when the lock is held by an untagged holder
//     (once its presence key is written).
// Each side writes its own key before reading the other's and etcd's reads
// are linearizable, so of two servers started at the same moment at least
// one sees the other.
//
// Thread-safety: the functions are thread-safe; SharedPresence is created
// and destroyed on one thread (its re-registering thread is internal).
#ifndef CKPTFS_SERVER_META_ETCD_ETCD_SERVING_MODE_H_
#define CKPTFS_SERVER_META_ETCD_ETCD_SERVING_MODE_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/meta/etcd/etcd_client.h"
#include "server/meta/etcd/etcd_server_lock.h"

namespace ckptfs::meta {

// The duty-lock holder name of a shared server: "<listen> (pid N, shared)".
std::string SharedHolderName(const std::string& listen, int pid);
// Whether a lock holder name is a shared server's.
bool IsSharedHolderName(const std::string& holder);

// The etcd key prefix under which shared servers keep their presence keys.
std::string SharedPresencePrefix(const std::string& key_prefix);

// OK when no shared server runs on `key_prefix`; FAILED_PRECONDITION naming
// one that does and saying to start this one with --etcd_shared; the etcd
// error when etcd cannot be read.
absl::Status CheckNoSharedServers(EtcdClient& client, const std::string& key_prefix);

// OK when the prefix's lock is free or held by a shared server;
// FAILED_PRECONDITION naming the exclusive holder and saying to stop it or
// to start this one without --etcd_shared; the etcd error otherwise.
absl::Status CheckNoExclusiveServer(EtcdClient& client, const std::string& key_prefix);

// A shared server's presence key, held for the life of the object. The key
// is the holder's name, this host's name and a random number (two servers
// listening on 0.0.0.0:7000 with the same pid in two containers still get
// two keys). If the lease is lost (etcd unreachable for a TTL), the key is
// written again in the background and the exclusive check repeated; if an
// exclusive server started meanwhile, `on_conflict` runs (on that thread;
// the metadata server exits, as one that lost its exclusive lock does).
class SharedPresence {
 public:
  // Writes the presence key of `holder` (waiting at most `wait` for etcd),
  // then runs CheckNoExclusiveServer. On any failure the key is removed
  // and the error returned.
  static absl::StatusOr<std::unique_ptr<SharedPresence>> Register(
      std::shared_ptr<EtcdClient> client, const std::string& key_prefix, const std::string& holder,
      absl::Duration ttl, absl::Duration wait,
      std::function<void(const absl::Status&)> on_conflict);

  SharedPresence(const SharedPresence&) = delete;
  SharedPresence& operator=(const SharedPresence&) = delete;
  // Removes the presence key (revokes its lease).
  ~SharedPresence();

 private:
  SharedPresence(std::shared_ptr<EtcdClient> client, EtcdServerLock::Options options,
                 std::function<void(const absl::Status&)> on_conflict);
  // Takes the key; on_lost wakes the re-registering thread.
  absl::StatusOr<std::unique_ptr<EtcdServerLock>> Take(absl::Duration wait);
  void Loop();

  const std::shared_ptr<EtcdClient> client_;
  const EtcdServerLock::Options options_;
  const std::function<void(const absl::Status&)> on_conflict_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<EtcdServerLock> key_;  // only Register and Loop touch it
  std::thread thread_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_ETCD_ETCD_SERVING_MODE_H_
