// MetaServer: one running metadata service — the RocksDB store under the
// data dir, the namespace, membership, the orphan reclaimer, the checkpoint
// coordinator and the gRPC server — assembled and torn down in the right
// order. Used by main.cc and by
// in-process tests (listen on 127.0.0.1:0, then ask address()).
//
// Several servers on one store (ckptfs-meta --etcd_shared): Options::
// shared_poll makes the commit barriers learn from the store, and
// Options::duties = false leaves the orphan reclaimer to StartDuties /
// StopDuties, which main.cc calls while this server holds the cluster's duty
// lock. What stays per server: the status board (clients that heartbeat here,
// storage-server loads, checkpoints seen here) and the waiting commits.
//
// Metrics (common/metrics, the default registry): every RPC through
// RpcMetricsFactory (ckptfs_meta_rpc*), the storage servers' count, capacity
// and use computed from Membership at scrape time, and the commit barrier's
// (CheckpointCoordinator).
//
// Thread-safety: Start and Shutdown from the owning thread; the accessors are
// safe from any thread while the server runs.
#ifndef CKPTFS_SERVER_META_META_SERVER_H_
#define CKPTFS_SERVER_META_META_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/checkpoint/committer.h"
#include "server/meta/checkpoint/coordinator.h"
#include "server/meta/clock.h"
#include "server/meta/credential_check.h"
#include "server/meta/membership.h"
#include "server/meta/meta_service.h"
#include "server/meta/namespace.h"
#include "server/meta/orphan_reclaimer.h"
#include "server/meta/rocksdb_kv_store.h"

namespace ckptfs::meta {

class MetaServer {
 public:
  struct Options {
    std::string listen = "127.0.0.1:7000";  // host:port; port 0 picks one
    std::string data_dir;  // the RocksDB store's directory; must exist unless a store is given
    absl::Duration orphan_grace = absl::Hours(1);
    absl::Duration server_timeout = absl::Seconds(10);
    uint32_t default_chunk_size = 4u << 20;
    // Copies of each chunk of new files (Namespace::Options::default_replicas).
    uint32_t default_replicas = 1;
    // Erasure coding of new files (Namespace::Options::default_ec).
    ErasureCodeSpec default_ec;
    absl::Duration reclaim_interval = absl::Seconds(5);
    bool sync_commits = false;  // RocksDbKvStore::Options::sync
    // A checkpoint's barrier timeout when nothing else sets it.
    uint32_t commit_timeout_s = 600;
    // How long a CommitCheckpoint long poll waits when it does not say.
    absl::Duration commit_poll = absl::Seconds(20);
    // Bounds each storage server's SYNC at a checkpoint commit.
    absl::Duration commit_sync_timeout = absl::Seconds(120);
    Clock* clock = Clock::Real();  // borrowed
    // The cluster credential (common/credential.h): every RPC must carry it
    // (credential_check.h), and the service presents it on the data
    // connections it dials (commit SYNC, orphan TRIM). Empty: no checks.
    std::string credential;
    // The server credential, which the RPCs administering the cluster take
    // instead (credential_check.h), and which the service then presents on
    // its data connections. Empty: `credential` serves for both.
    std::string server_credential;
    // Other metadata servers serve the same store at the same time
    // (ckptfs-meta --etcd_shared): the commit barriers learn from the store
    // every this often (CheckpointCoordinator::Options::shared_poll); zero:
    // this server is the only one.
    absl::Duration shared_poll = absl::ZeroDuration();
    // Run the once-per-cluster duties (the orphan reclaimer) from Start.
    // False: only between StartDuties and StopDuties (with several servers,
    // while this one holds the cluster's duty lock).
    bool duties = true;
    // Counts a checkpoint's stored arrivals (CheckpointStore::
    // set_arrival_counter); empty: they are scanned.
    CheckpointStore::KeyCounter count_keys;
  };

  // Opens the store — `store` when given (e.g. an EtcdKvStore), else the
  // embedded RocksDB in options.data_dir (EBUSY "data dir ... in use" if
  // another process has it) — creates the root directory on a new store,
  // resumes pending checkpoints, binds `listen` (EADDRINUSE naming the
  // address if busy) and starts serving and reclaiming.
  static absl::StatusOr<std::unique_ptr<MetaServer>> Start(
      const Options& options, std::unique_ptr<KvStore> store = nullptr);

  MetaServer(const MetaServer&) = delete;
  MetaServer& operator=(const MetaServer&) = delete;
  ~MetaServer() { Shutdown(); }

  // Answers waiting checkpoint commits (UNAVAILABLE: clients retry), stops
  // accepting calls, lets calls in flight finish (bounded), stops the
  // reclaimer. Idempotent.
  void Shutdown();

  // Starts / stops the once-per-cluster duties (a fresh orphan reclaimer
  // each time; on a shared store also watching the PENDING checkpoints
  // whose server died: CheckpointCoordinator::set_adopt_pending). Idempotent; any thread, not
  // concurrently with Shutdown.
  void StartDuties();
  void StopDuties();
  bool runs_duties();

  // host:port actually bound (the port resolved when listen asked for 0).
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  Namespace& ns() { return *ns_; }
  Membership& membership() { return *membership_; }
  // The orphan reclaimer of the running duties; when there are none, the
  // last one (stopped) or one never started (RunOnce still works: tests).
  // Never destroyed before the server.
  OrphanReclaimer& reclaimer();
  CheckpointCoordinator& checkpoints() { return *checkpoints_; }

 private:
  MetaServer() = default;

  // Destroyed in reverse order: the gRPC server, coordinator and reclaimer
  // before the namespace and the store they use.
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<Namespace> ns_;
  // Guards replacing reclaimer_ (StartDuties), running_duties_ and
  // shut_down_. Never held across OrphanReclaimer::Stop (a join); the
  // coordinator's on_orphans callback takes it (to wake the reclaimer).
  absl::Mutex duties_mu_;
  std::unique_ptr<OrphanReclaimer> reclaimer_ ABSL_GUARDED_BY(duties_mu_);
  OrphanReclaimer::Options reclaim_options_;
  bool running_duties_ ABSL_GUARDED_BY(duties_mu_) = false;
  bool reclaimer_started_ ABSL_GUARDED_BY(duties_mu_) = false;
  // Reclaimers of earlier duty periods, stopped (kept: reclaimer() may
  // have handed one out).
  std::vector<std::unique_ptr<OrphanReclaimer>> old_reclaimers_;
  std::unique_ptr<CheckpointStore> checkpoint_store_;
  std::unique_ptr<Committer> committer_;
  std::unique_ptr<CheckpointCoordinator> checkpoints_;
  std::unique_ptr<MetaServiceImpl> service_;
  std::unique_ptr<AuthenticatedMetaService> authenticated_;  // with a credential
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;
  bool shut_down_ ABSL_GUARDED_BY(duties_mu_) = false;
  // Last: the scrape-time gauges go before the Membership they read.
  std::vector<metrics::CallbackHandle> metric_callbacks_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_META_SERVER_H_
