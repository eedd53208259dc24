// EtcdKvStore: the KvStore backend on an etcd v3 cluster, for metadata that
// must outlive one machine and be served by several metadata servers.
//
// The mapping is the one kv_store.h was shaped for:
//   Get    -> KV.Range(key)                       version = mod_revision
//   Scan   -> KV.Range([from, prefix_end), limit) key order
//   Commit -> KV.Txn(compare mod_revision == v for every compare;
//                    success: the puts and deletes)
// Every key lives under `key_prefix` (e.g. "/ckptfs/"), so one etcd cluster
// can hold several ckptfs clusters' namespaces; callers never see the prefix.
// Reads are linearizable (etcd's default), and a commit is durable when etcd
// answers (etcd fsyncs its raft log on a quorum), so Txn::RequireDurable has
// nothing more to do. Revisions are etcd's: they increase across commits and
// every key one commit writes gets that commit's revision.
//
// Failover: calls go through an EtcdClient (etcd_client.h), which knows
// every member and retries on the next one after a connection-level failure
// until its call timeout runs out. A Txn whose
// outcome is unknown (the member died after it was sent) is resolved before
// being sent again: every Txn that writes also creates a marker key unique
// to it (outside the key prefix: "<prefix without its last '/'>.txn/<store>/
// <n>", attached to a lease so markers expire after a few minutes) and
// requires it absent. So however many times it is sent, it applies at most
// once; a failed Txn's answer includes the marker, and a marker that exists
// means an earlier attempt applied it (at the marker's revision) rather than
// a conflict. A Txn with no writes is always safe to resend.
//
// Fencing (SetFence): a metadata server that serves under an
// EtcdServerLock makes every writing Txn also require that the lock key is
// still attached to its lease, so a server that lost the lock (paused,
// partitioned) cannot write after a standby took over. Servers that serve
// one prefix together (ckptfs-meta --etcd_shared) set no fence: every write
// is a Txn comparing what it read, which is all they need to agree.
//
// Limits: etcd bounds a Txn's operations (--max-txn-ops, default 128) and a
// request's size (--max-request-bytes, 1.5 MiB). A checkpoint's commit
// compares every file of the checkpoint, so run etcd with --max-txn-ops of at
// least the largest checkpoint's file count + 16 and --max-request-bytes of a
// few tens of MiB (`ckptfs up --meta-backend etcd` does). A Txn over the
// limit fails with etcd's message, which names the flag.
//
// Thread-safety: thread-safe; Get, Scan and Commit run concurrently.
#ifndef CKPTFS_SERVER_META_ETCD_ETCD_KV_STORE_H_
#define CKPTFS_SERVER_META_ETCD_ETCD_KV_STORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/meta/etcd/etcd_client.h"
#include "server/meta/kv_store.h"

namespace ckptfs::meta {

class EtcdKvStore : public KvStore {
 public:
  struct Options {
    // Prefix of every key in etcd. Must not be empty (a ckptfs cluster never
    // owns a whole etcd keyspace).
    std::string key_prefix = "/ckptfs/";
  };

  // Checks that some member answers a read within the client's call
  // timeout: UNAVAILABLE naming every endpoint if none does. InvalidArgument
  // for an empty key prefix, or a call timeout so long that a Txn's marker
  // could expire before its outcome is checked.
  static absl::StatusOr<std::unique_ptr<EtcdKvStore>> Open(std::shared_ptr<EtcdClient> client,
                                                           Options options);

  EtcdKvStore(const EtcdKvStore&) = delete;
  EtcdKvStore& operator=(const EtcdKvStore&) = delete;
  ~EtcdKvStore() override;

  absl::StatusOr<std::optional<VersionedValue>> Get(absl::string_view key) override;
  absl::StatusOr<std::vector<KeyValue>> Scan(absl::string_view prefix,
                                             absl::string_view start_after, size_t limit) override;
  absl::StatusOr<int64_t> Commit(const Txn& txn) override;

  EtcdClient& client() { return *client_; }

  // How many keys start with `prefix`: one count-only KV.Range (etcd sends
  // no keys back), for the commit barrier's stored arrival count when
  // several metadata servers serve one namespace.
  absl::StatusOr<uint64_t> CountPrefix(absl::string_view prefix);

  // From now on every writing Txn requires `key` to be attached to `lease`
  // (EtcdServerLock); one that fails for that runs `on_lost` and returns
  // EIO. Call once, before the store is shared between threads.
  void SetFence(std::string key, int64_t lease, std::function<void()> on_lost);

 private:
  EtcdKvStore(std::shared_ptr<EtcdClient> client, Options options);

  // The lease markers are attached to: granted on first use and replaced
  // when half its time to live has passed (the old one expires by itself,
  // taking its markers with it).
  absl::StatusOr<int64_t> MarkerLease();

  const std::shared_ptr<EtcdClient> client_;
  const Options options_;
  const std::string marker_prefix_;  // "<prefix>.txn/<random store id>/"
  std::atomic<uint64_t> next_marker_{1};
  std::string fence_key_;
  int64_t fence_lease_ = 0;  // 0: no fence
  std::function<void()> fence_lost_;

  absl::Mutex lease_mu_;
  int64_t lease_id_ ABSL_GUARDED_BY(lease_mu_) = 0;
  absl::Time lease_granted_ ABSL_GUARDED_BY(lease_mu_);
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_ETCD_ETCD_KV_STORE_H_
