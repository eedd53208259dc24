// EtcdDutyLock: when several metadata servers serve one etcd prefix at once
// (ckptfs-meta --etcd_shared), the duties that must run once per cluster
// (the orphan reclaimer: it sweeps and deletes) run only on the server
// holding the prefix's EtcdServerLock.
//
// A thread takes the lock, waiting while another server holds it; once it
// has it, runs `start`. When the lock is lost (the lease could not be
// renewed for a TTL: etcd unreachable, the process paused) it runs `stop`,
// releases what is left of the lock and waits for it again, so a server
// that lost it keeps serving and may take the duties back later. The
// destructor runs `stop` and revokes the lease, so another server takes
// the duties over at once.
//
// Thread-safety: construct and destroy on one thread; `start` and `stop`
// run only on the internal thread, never concurrently (the destructor
// wakes that thread and joins it once it ran `stop`); held() from any
// thread.
#ifndef CKPTFS_SERVER_META_ETCD_ETCD_DUTY_LOCK_H_
#define CKPTFS_SERVER_META_ETCD_ETCD_DUTY_LOCK_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/meta/etcd/etcd_client.h"
#include "server/meta/etcd/etcd_server_lock.h"

namespace ckptfs::meta {

class EtcdDutyLock {
 public:
  // Starts the thread. options.cancelled and options.wait are replaced
  // (the thread waits until the destructor); options.duties_only is set.
  EtcdDutyLock(std::shared_ptr<EtcdClient> client, EtcdServerLock::Options options,
               std::function<void()> start, std::function<void()> stop);
  EtcdDutyLock(const EtcdDutyLock&) = delete;
  EtcdDutyLock& operator=(const EtcdDutyLock&) = delete;
  ~EtcdDutyLock();

  // Whether this server runs the duties now.
  bool held();

 private:
  void Loop();

  const std::shared_ptr<EtcdClient> client_;
  EtcdServerLock::Options options_;
  const std::function<void()> start_;
  const std::function<void()> stop_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_ETCD_ETCD_DUTY_LOCK_H_
