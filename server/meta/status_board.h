// StatusBoard: what the metadata service remembers, in memory only, for
// `ckptfs status` (the ClusterStatus RPC): the Clients that announced
// themselves (ClientHeartbeat), the load and scrub totals the storage
// servers report with their heartbeats, the repairer's last report
// (ReportRepair), and the checkpoints it has seen so it can list the
// pending ones without scanning the KV store.
//
// Nothing here is durable and nothing here is written to the KV store: a
// restarted service starts empty and fills again within one heartbeat
// interval (checkpoints: when a client next touches them; the repair report:
// at the repairer's next report). With several metadata servers serving one
// store (--etcd_shared) each has its own board: a status shows what reached
// the server that answers it. Every table is bounded, so a flood of
// short-lived clients cannot grow it without limit.
//
// Thread-safety: thread-safe; mu_ is a leaf lock, held for map updates only.
#ifndef CKPTFS_SERVER_META_STATUS_BOARD_H_
#define CKPTFS_SERVER_META_STATUS_BOARD_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/meta.pb.h"

namespace ckptfs::meta {

// The version this build reports (ClusterStatusReply.version).
inline constexpr char kServiceVersion[] = "ckptfs 0.1";

class StatusBoard {
 public:
  // Bounds of the tables; the oldest entries go first.
  static constexpr size_t kMaxClients = 4096;
  static constexpr size_t kMaxCheckpoints = 65536;
  // A client missing this many heartbeats in a row is forgotten.
  static constexpr int kMissedHeartbeats = 3;

  // Records a client's heartbeat at `now_ms` (wall clock), from `peer`.
  void ClientHeartbeat(const ClientHeartbeatRequest& request, const std::string& peer,
                       int64_t now_ms);
  // The clients heard from recently enough, newest heartbeat first; drops
  // the expired ones.
  std::vector<ClientInfo> Clients(int64_t now_ms);

  // Records a storage server's load from its heartbeat (received at
  // `now_ms`), when it reports one, and its scrub report: the heartbeat's,
  // or none when the heartbeat carries none (has_scrub()).
  void ServerHeartbeat(const HeartbeatRequest& request, int64_t now_ms);
  // `info` with the load and scrub report last reported by its server.
  ServerStatus ServerStatusOf(const ServerInfo& info);

  // Keeps `report` (its strings capped) as the repairer's last, received at
  // `now_ms` (the service's wall clock); it replaces the one before.
  void RepairReported(const RepairReport& report, int64_t now_ms);
  // The last repair report and when it came; nullopt if none came since the
  // service started.
  struct RepairEntry {
    RepairReport report;
    int64_t reported_ms = 0;
  };
  std::optional<RepairEntry> LastRepair();

  // A checkpoint directory the service has seen (declared, committed,
  // looked at); Forget when it is no longer pending.
  void SeeCheckpoint(uint64_t ino);
  void ForgetCheckpoint(uint64_t ino);
  std::vector<uint64_t> Checkpoints();

 private:
  struct ClientEntry {
    ClientInfo info;
    int64_t expires_ms = 0;
  };
  struct LoadEntry {
    int64_t at_ms = 0;
    uint32_t connections = 0;
    uint64_t read_total = 0, written_total = 0;
    uint64_t read_per_s = 0, write_per_s = 0;
  };

  absl::Mutex mu_;  // leaf
  std::map<std::string, ClientEntry> clients_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, LoadEntry> loads_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, ScrubReport> scrubs_ ABSL_GUARDED_BY(mu_);
  std::optional<RepairEntry> repair_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> checkpoints_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_STATUS_BOARD_H_
