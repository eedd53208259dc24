// EtcdServerLock: the one metadata server allowed to serve a ckptfs
// namespace stored in etcd holds this lock; others wait as standbys.
//
// The lock is a key ("<prefix without its last '/'>.server") whose value
// names the holder, attached to an etcd lease that a keep-alive thread
// renews every ttl/3. Taking it is one Txn: "create the key if it does not
// exist". A holder that cannot renew its lease for a whole ttl (etcd
// unreachable, or the lease expired) has lost the lock: `on_lost` runs once,
// on the keep-alive thread, and must stop the server at once (the metadata
// server exits, so a standby takes over and resumes pending checkpoints from
// etcd). Releasing (the destructor) revokes the lease, which frees the key
// for a standby immediately.
//
// By default this lock keeps a second server from serving beside the first.
// Servers that serve one prefix together (ckptfs-meta --etcd_shared) take it
// only for the duties that must run once per cluster (etcd_duty_lock.h).
//
// Thread-safety: construct and destroy on one thread; the keep-alive thread
// is internal.
#ifndef CKPTFS_SERVER_META_ETCD_ETCD_SERVER_LOCK_H_
#define CKPTFS_SERVER_META_ETCD_ETCD_SERVER_LOCK_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/meta/etcd/etcd_client.h"

namespace ckptfs::meta {

class EtcdServerLock {
 public:
  struct Options {
    std::string key_prefix = "/ckptfs/";  // the namespace's etcd prefix
    // The key to hold; empty: LockKey(key_prefix). (A shared server's
    // presence key, etcd_serving_mode.h, is held the same way.)
    std::string key;
    std::string holder;  // who we are, e.g. "127.0.0.1:7000 pid 123"
    absl::Duration ttl = absl::Seconds(10);
    // Longest wait for a lock another server holds (InfiniteDuration: wait
    // as a standby until it is free).
    absl::Duration wait = absl::InfiniteDuration();
    // Asked between attempts while waiting; true gives up with CANCELLED
    // (e.g. the server was told to stop while a standby). May be empty.
    std::function<bool()> cancelled;
    // The lock only guards the once-per-cluster duties of servers that all
    // serve (etcd_duty_lock.h): says so when waiting, instead of "standby".
    bool duties_only = false;
  };

  // Takes the lock, waiting while another holder has it (logging who, once)
  // and while etcd cannot be reached (logging each failure). When `wait`
  // passes: DEADLINE_EXCEEDED with the holder's name, or the last etcd
  // error; CANCELLED when options.cancelled says so.
  static absl::StatusOr<std::unique_ptr<EtcdServerLock>> Acquire(std::shared_ptr<EtcdClient> client,
                                                                 Options options,
                                                                 std::function<void()> on_lost);

  EtcdServerLock(const EtcdServerLock&) = delete;
  EtcdServerLock& operator=(const EtcdServerLock&) = delete;
  // Stops renewing and revokes the lease (the key goes with it).
  ~EtcdServerLock();

  // The etcd key of the lock of `key_prefix`.
  static std::string LockKey(const std::string& key_prefix);
  // The lease the lock key is attached to while held (for fencing writes,
  // EtcdKvStore::SetFence).
  int64_t lease() const { return lease_; }

 private:
  EtcdServerLock(std::shared_ptr<EtcdClient> client, Options options, int64_t lease,
                 std::function<void()> on_lost);
  void KeepAlive();
  enum class Renewal { kRenewed, kExpired, kFailed };
  // One renewal on the current member (kFailed moves to the next member).
  Renewal RenewOnce();

  const std::shared_ptr<EtcdClient> client_;
  const Options options_;
  const int64_t lease_;
  const std::function<void()> on_lost_;
  absl::Notification stop_;
  std::thread keep_alive_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_ETCD_ETCD_SERVER_LOCK_H_
