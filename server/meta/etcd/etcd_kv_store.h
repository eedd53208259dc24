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
// Failover: the store is given every member's address. A call that fails with
// UNAVAILABLE or DEADLINE_EXCEEDED moves to the next member and is retried
// until `call_timeout` (per call, over all attempts) runs out. A Txn whose
// outcome is unknown (the member died after it was sent) is resolved before
// any retry: every Txn that writes also puts a marker key unique to it
// (outside the key prefix: "<prefix without its last '/'>.txn/<store>/<n>",
// attached to a lease so markers expire after a few minutes). If the marker
// exists, the Txn was applied, at the marker's revision; if not, it is sent
// again (its compares still decide). The read is linearizable, so after a
// leader change it is final; only a Txn that the same, live leader is still
// applying when the attempt times out (attempt_timeout) could land after the
// check. A Txn with no writes is always safe to resend.
//
// Limits: etcd bounds a Txn's operations (--max-txn-ops, default 128) and a
// request's size (--max-request-bytes, 1.5 MiB). A checkpoint's commit
// compares every file of the checkpoint, so run etcd with --max-txn-ops of at
// least the largest checkpoint's file count + 16 and --max-request-bytes of a
// few tens of MiB (`ckptfs up --meta-backend etcd` does). A Txn over the
// limit fails with etcd's message, which names the flag.
//
// Thread-safety: thread-safe; Get, Scan and Commit run concurrently (gRPC
// stubs are thread-safe; the current member is an atomic index).
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
#include "proto/etcd/rpc.grpc.pb.h"
#include "server/meta/kv_store.h"

namespace ckptfs::meta {

class EtcdKvStore : public KvStore {
 public:
  struct Options {
    // host:port of each etcd member's client URL (plain-text gRPC), in the
    // order tried first.
    std::vector<std::string> endpoints;
    // Prefix of every key in etcd. Must not be empty (a ckptfs cluster never
    // owns a whole etcd keyspace).
    std::string key_prefix = "/ckptfs/";
    // Deadline of one Get, Scan or Commit over all its attempts.
    absl::Duration call_timeout = absl::Seconds(30);
    // Deadline of one attempt on one member.
    absl::Duration attempt_timeout = absl::Seconds(5);
  };

  // Connects (lazily: gRPC channels) and checks that some member answers a
  // read within call_timeout; UNAVAILABLE naming every endpoint if none does.
  // InvalidArgument for an empty endpoint list or key prefix.
  static absl::StatusOr<std::unique_ptr<EtcdKvStore>> Open(Options options);

  // "a:1,b:2" -> {"a:1", "b:2"}; InvalidArgument for an empty list or an
  // entry that is not host:port.
  static absl::StatusOr<std::vector<std::string>> ParseEndpoints(absl::string_view list);

  EtcdKvStore(const EtcdKvStore&) = delete;
  EtcdKvStore& operator=(const EtcdKvStore&) = delete;
  ~EtcdKvStore() override;

  absl::StatusOr<std::optional<VersionedValue>> Get(absl::string_view key) override;
  absl::StatusOr<std::vector<KeyValue>> Scan(absl::string_view prefix,
                                             absl::string_view start_after,
                                             size_t limit) override;
  absl::StatusOr<int64_t> Commit(const Txn& txn) override;

 private:
  struct Member;
  explicit EtcdKvStore(Options options);

  // Runs `attempt` on the current member, moving on to the next member after
  // a connection-level failure (UNAVAILABLE, DEADLINE_EXCEEDED), until it
  // succeeds, fails otherwise, or the call's deadline passes. Before each
  // retry, `applied` (may be empty) is asked whether the failed attempt took
  // effect after all; true ends the call with OK.
  absl::Status Call(absl::string_view what,
                    const std::function<grpc::Status(Member&, grpc::ClientContext&)>& attempt,
                    const std::function<absl::StatusOr<bool>()>& applied);
  // Reads the range [key, range_end) (range_end empty: one key).
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const std::string& key,
                                                    const std::string& range_end, int64_t limit);
  // The lease markers are attached to: granted on first use and replaced
  // when half its time to live has passed (the old one expires by itself,
  // taking its markers with it).
  absl::StatusOr<int64_t> MarkerLease();

  const Options options_;
  const std::string marker_prefix_;  // "<prefix>.txn/<random store id>/"
  std::vector<std::unique_ptr<Member>> members_;
  std::atomic<size_t> current_{0};
  std::atomic<uint64_t> next_marker_{1};

  absl::Mutex lease_mu_;
  int64_t lease_id_ ABSL_GUARDED_BY(lease_mu_) = 0;
  absl::Time lease_granted_ ABSL_GUARDED_BY(lease_mu_);
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_ETCD_ETCD_KV_STORE_H_
