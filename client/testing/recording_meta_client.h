// RecordingMetaClient: a MetaClient that passes every call to another one
// (for tests: a client of the real service, client/testing/in_process_meta.h)
// and keeps what tests ask about the calls themselves: how many of each RPC
// were made, the requests of a few RPCs, and failures injected in front of
// the service. What the service did with a request is the service's to say
// (InProcessMetaService), not this class's.
//
// Every call counts, injected failures included. A call that FailNext
// fails returns its status before anything is forwarded (as if it never
// reached the service) and is not recorded below; every other call is
// recorded before it is forwarded, whatever the service answers.
//
// Thread-safety: thread-safe. No lock is held while the inner client runs,
// so calls proceed concurrently (long polls included).
#ifndef CKPTFS_CLIENT_TESTING_RECORDING_META_CLIENT_H_
#define CKPTFS_CLIENT_TESTING_RECORDING_META_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/meta_client.h"

namespace ckptfs::client::testing {

class RecordingMetaClient : public MetaClient {
 public:
  explicit RecordingMetaClient(std::unique_ptr<MetaClient> inner) : inner_(std::move(inner)) {}

  absl::StatusOr<meta::AttrReply> Lookup(const meta::LookupRequest& request) override;
  absl::StatusOr<meta::AttrReply> GetAttr(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::AttrReply> SetAttr(const meta::SetAttrRequest& request) override;
  absl::StatusOr<meta::CreateReply> Create(const meta::CreateRequest& request) override;
  absl::StatusOr<meta::AttrReply> Mkdir(const meta::MkdirRequest& request) override;
  absl::StatusOr<meta::AttrReply> Symlink(const meta::SymlinkRequest& request) override;
  absl::StatusOr<meta::AttrReply> Mknod(const meta::MknodRequest& request) override;
  absl::StatusOr<meta::AttrReply> Link(const meta::LinkRequest& request) override;
  absl::StatusOr<meta::ReadLinkReply> ReadLink(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::Empty> Unlink(const meta::LookupRequest& request) override;
  absl::StatusOr<meta::Empty> Rmdir(const meta::LookupRequest& request) override;
  absl::StatusOr<meta::Empty> Rename(const meta::RenameRequest& request) override;
  absl::StatusOr<meta::ReadDirReply> ReadDir(const meta::ReadDirRequest& request) override;
  absl::StatusOr<meta::AttrReply> Open(const meta::OpenRequest& request) override;
  absl::StatusOr<meta::AttrReply> CommitWrite(const meta::CommitWriteRequest& request) override;
  absl::StatusOr<meta::Empty> ReleaseReader(const meta::ReleaseReaderRequest& request) override;
  absl::StatusOr<meta::Empty> SetXattr(const meta::SetXattrRequest& request) override;
  absl::StatusOr<meta::XattrValue> GetXattr(const meta::XattrRequest& request) override;
  absl::StatusOr<meta::XattrNames> ListXattr(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::Empty> RemoveXattr(const meta::XattrRequest& request) override;
  absl::StatusOr<meta::StatFsReply> StatFs(const meta::Empty& request) override;
  absl::StatusOr<meta::CheckpointInfo> DeclareCheckpoint(
      const meta::DeclareCheckpointRequest& request) override;
  absl::StatusOr<meta::CheckpointInfo> CommitCheckpoint(
      const meta::CommitCheckpointRequest& request, Cancellation* cancel) override;
  absl::StatusOr<meta::CheckpointInfo> GetCheckpoint(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::ListCheckpointsReply> ListCheckpoints(
      const meta::InodeRequest& request) override;
  absl::StatusOr<meta::Empty> RemoveCheckpoint(
      const meta::RemoveCheckpointRequest& request) override;
  absl::StatusOr<meta::RegisterServerReply> RegisterServer(
      const meta::RegisterServerRequest& request) override;
  absl::StatusOr<meta::Empty> Heartbeat(const meta::HeartbeatRequest& request) override;
  absl::StatusOr<meta::ListServersReply> ListServers(const meta::Empty& request) override;
  absl::StatusOr<meta::Attr> MoveStripeServer(uint64_t ino, uint32_t from, uint32_t to) override;
  absl::Status ReportRepair(const meta::RepairReport& report) override;
  absl::StatusOr<meta::Empty> ClientHeartbeat(const meta::ClientHeartbeatRequest& request) override;
  absl::StatusOr<meta::ClusterStatusReply> ClusterStatus(
      const meta::ClusterStatusRequest& request) override;

  // Calls of `rpc` (e.g. "CommitWrite") so far, failed ones included.
  int Calls(absl::string_view rpc) const;
  // The next `times` calls of `rpc` fail with `status` before they are
  // forwarded; `times` <= 0 cancels what is left of an earlier FailNext.
  void FailNext(absl::string_view rpc, absl::Status status, int times = 1);

  // Every nonzero writer_handle of the Create and Open requests forwarded,
  // in order.
  std::vector<uint64_t> Registrations() const;
  // Every CommitWrite request forwarded, in order.
  std::vector<meta::CommitWriteRequest> CommitWrites() const;
  // Every ReportRepair report forwarded, in order.
  std::vector<meta::RepairReport> RepairReports() const;

  // The CommitCheckpoint requests forwarded: long polls (counted when
  // sent), no_wait arrivals (counted once answered), and the most long
  // polls in flight at one time.
  struct CommitCounts {
    int long_polls = 0;
    int no_wait = 0;
    int long_polls_peak = 0;
  };
  CommitCounts CommitCheckpointCounts() const;

 private:
  // Counts the call and returns the injected failure, if any.
  absl::Status Enter(absl::string_view rpc);
  // Enter, then `method` of the inner client unless a failure was injected.
  template <typename Reply, typename Request>
  absl::StatusOr<Reply> Forward(absl::string_view rpc,
                                absl::StatusOr<Reply> (MetaClient::*method)(const Request&),
                                const Request& request);

  const std::unique_ptr<MetaClient> inner_;
  mutable absl::Mutex mu_;
  std::map<std::string, int, std::less<>> calls_ ABSL_GUARDED_BY(mu_);
  struct Failure {
    absl::Status status;
    int times = 0;
  };
  std::map<std::string, Failure, std::less<>> fail_next_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> registrations_ ABSL_GUARDED_BY(mu_);
  std::vector<meta::CommitWriteRequest> commit_writes_ ABSL_GUARDED_BY(mu_);
  std::vector<meta::RepairReport> repair_reports_ ABSL_GUARDED_BY(mu_);
  CommitCounts commit_counts_ ABSL_GUARDED_BY(mu_);
  int long_polls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ckptfs::client::testing

#endif  // CKPTFS_CLIENT_TESTING_RECORDING_META_CLIENT_H_
