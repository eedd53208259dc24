// FakeMetaClient: the metadata service in memory, for unit tests of the
// client and of anything built on it (fuse/ may use it too).
//
// It keeps inodes, directory entries, symlink targets, xattrs and layouts
// like the real service: inode numbers from a counter (root = 1), chunk size
// from the parent directory's "user.ckptfs.chunk_size" xattr (inherited by
// new subdirectories) or the default, stripe = all servers rotated by a
// counter. Unlinked files stay reachable by inode (as orphans do). Tests can
// count calls per RPC and make the next calls of an RPC fail. The repairer's
// calls: MoveStripeServer edits the stripe as the service does, and
// ReportRepair keeps every report for the test to read. Regular files keep
// the chunks written (common/written_chunks.h) as the service does: empty
// at create and O_TRUNC, added by CommitWrite, cut by a truncate, returned
// by GetAttr with_written.
//
// Checkpoint transactions follow the service's contract: declare marks the
// subtree, writers register with Create/Open and leave with CommitWrite,
// the last rank's commit checks for open and damaged files and commits
// (files, bytes, the run directory's `latest` symlink, retention by
// user.ckptfs.keep) or aborts (subtree emptied); a pending checkpoint past
// its timeout (counted from the first commit) aborts with ETIMEDOUT when a
// call next looks at it; committed and aborted ones are read-only (EROFS);
// ReadDir hides pending and aborted ones. Commit long polls wait on a
// condition variable (no thread per checkpoint); a no_wait commit records
// the arrival and answers at once. Storage is not modelled:
// no SYNC is sent, aborted files' chunks stay in the fake transport.
//
// Thread-safety: thread-safe (one mutex).
#ifndef CKPTFS_CLIENT_TESTING_FAKE_META_CLIENT_H_
#define CKPTFS_CLIENT_TESTING_FAKE_META_CLIENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/meta_client.h"
#include "common/reserved_xattrs.h"

namespace ckptfs::client::testing {

class FakeMetaClient : public MetaClient {
 public:
  // Storage servers `server_ids` (addresses "127.0.0.1:<7000 + id>");
  // files get `default_chunk_size` unless their directory says otherwise.
  explicit FakeMetaClient(std::vector<uint32_t> server_ids = {1, 2, 3, 4},
                          uint32_t default_chunk_size = 4u << 20);

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
  // As the service: `to` must be one of the fake's servers.
  absl::StatusOr<meta::Attr> MoveStripeServer(uint64_t ino, uint32_t from, uint32_t to) override;
  absl::Status ReportRepair(const meta::RepairReport& report) override;

  // Calls of `rpc` (e.g. "CommitWrite") so far, failed ones included.
  int Calls(absl::string_view rpc) const;
  // The next `times` calls of `rpc` fail with `status`, before doing
  // anything (as if they never reached the service).
  void FailNext(absl::string_view rpc, absl::Status status, int times = 1);
  // The size the service has recorded for `ino` (0 if unknown).
  uint64_t RecordedSize(uint64_t ino) const;
  // CommitWrite calls that asked for a durable commit (fsync), and the size
  // the last one recorded.
  int DurableCommits() const;
  uint64_t DurableSize(uint64_t ino) const;

  // Writer registration, as the service sees it.
  std::set<uint64_t> WriterHandles(uint64_t ino) const;
  // Reader holds (OpenRequest.reader_handle) not yet released. The fake
  // holds every regular file a read-only open names a reader of, inside a
  // checkpoint or not.
  std::set<uint64_t> ReaderHandles(uint64_t ino) const;
  bool Damaged(uint64_t ino) const;
  // Every nonzero writer_handle of Create and Open requests, in order.
  std::vector<uint64_t> Registrations() const;
  // Every CommitWrite request that reached the fake, in order.
  std::vector<meta::CommitWriteRequest> CommitWrites() const;
  // Every ReportRepair report that reached the fake, in order.
  std::vector<meta::RepairReport> RepairReports() const;

  // Checkpoints: the ranks waiting for an outcome, for tests that wait for
  // ranks to block: long polls blocked in the fake right now, plus the
  // ranks whose no_wait arrival was answered PENDING while that checkpoint
  // is still PENDING (their client holds them until its one long poll is
  // answered; one that gave up meanwhile still counts); the timeout used
  // when neither the request nor an xattr says.
  int WaitingCommits() const;
  // CommitCheckpoint calls that got past the injected failures and the
  // request checks (a bad rank, an undeclared directory): long polls and
  // no_wait arrivals, and the most long polls in the fake at one time.
  struct CommitCounts {
    int long_polls = 0;
    int no_wait = 0;
    int long_polls_peak = 0;
  };
  CommitCounts CommitCheckpointCounts() const;
  void set_default_commit_timeout_s(uint32_t seconds);

 private:
  struct Checkpoint {
    meta::CheckpointInfo info;  // name and arrived are filled when served
    std::set<uint32_t> arrived;
    // Ranks answered PENDING to a no_wait arrival (and not polling since).
    std::set<uint32_t> arrived_no_wait;
  };

  struct Inode {
    meta::Attr attr;
    std::map<std::string, uint64_t> entries;  // directories
    std::string target;                       // symlinks
    std::map<std::string, std::string> xattrs;
    uint64_t durable_size = 0;
    uint64_t parent = 0;                   // directories
    uint64_t in_checkpoint = 0;            // the checkpoint directory above, if any
    std::optional<Checkpoint> checkpoint;  // a declared directory
    std::set<uint64_t> writers;            // regular files
    std::set<uint64_t> readers;            // regular files
    bool damaged = false;
    meta::WrittenChunks written;  // regular files (common/written_chunks.h)
  };

  // Counts the call and returns the injected failure, if any.
  absl::Status Enter(absl::string_view rpc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Inode*> Find(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Inode*> FindDir(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FindDir for the parent an operation names an entry in: a missing one is
  // ESTALE, as the service answers (server/meta/ops/ops_util.h GetParentDir).
  absl::StatusOr<Inode*> FindParentDir(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A change of `attr`'s content or attributes now: ctime moves forward.
  static void Changed(meta::Attr& attr);
  Inode& NewInode(meta::FileType type, uint32_t mode, uint32_t uid, uint32_t gid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops one link of `ino` (an entry removed or replaced).
  void DropLink(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Checkpoints (fake_meta_client_checkpoints.cc) ---
  // The checkpoint `ino` belongs to (itself if it is one), or 0.
  uint64_t CheckpointOf(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a new child of directory `parent` inherits as in_checkpoint.
  uint64_t InheritedCheckpoint(uint64_t parent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // EROFS when `ino` is inside (or is) a committed or aborted checkpoint.
  absl::Status RequireMutable(uint64_t ino, absl::string_view op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets in_checkpoint of everything below directory `dir`.
  void MarkSubtree(uint64_t dir, uint64_t checkpoint) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // EINVAL for a reserved user.ckptfs.* name or a bad stored value.
  static absl::Status CheckStoredXattr(absl::string_view name, absl::string_view value,
                                       bool removing);
  meta::CheckpointInfo ServeInfo(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Aborts a pending checkpoint whose timeout has passed.
  void ExpireLocked(uint64_t ckpt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // All ranks arrived: commit or abort.
  void FinishLocked(uint64_t ckpt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbortLocked(uint64_t ckpt, int err, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A write of file `ino` failed: a pending checkpoint holding it aborts.
  void FileFailedLocked(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes everything below directory `dir` (files lose their link).
  void ClearSubtree(uint64_t dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes checkpoint child `name` of `run` with its subtree.
  void RemoveCheckpointLocked(uint64_t run, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Points `run`'s latest symlink at its newest committed checkpoint.
  void UpdateLatestLocked(uint64_t run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The newest committed checkpoint child of `run`, or "".
  std::string NewestCommittedLocked(uint64_t run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Regular files below `dir` as (path relative to it, ino).
  void ListFiles(uint64_t dir, const std::string& prefix,
                 std::vector<std::pair<std::string, uint64_t>>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<uint32_t> server_ids_;
  const uint32_t default_chunk_size_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Inode> inodes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ino_ ABSL_GUARDED_BY(mu_) = 2;
  uint64_t stripe_rotation_ ABSL_GUARDED_BY(mu_) = 0;
  int durable_commits_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int, std::less<>> calls_ ABSL_GUARDED_BY(mu_);
  struct Failure {
    absl::Status status;
    int times = 0;
  };
  std::map<std::string, Failure, std::less<>> fail_next_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> registrations_ ABSL_GUARDED_BY(mu_);
  std::vector<meta::CommitWriteRequest> commit_writes_ ABSL_GUARDED_BY(mu_);
  std::vector<meta::RepairReport> repair_reports_ ABSL_GUARDED_BY(mu_);
  // Signalled whenever a checkpoint's state or arrivals change.
  absl::CondVar checkpoint_changed_;
  int waiting_commits_ ABSL_GUARDED_BY(mu_) = 0;
  int long_polls_ ABSL_GUARDED_BY(mu_) = 0;
  int long_polls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int long_polls_peak_ ABSL_GUARDED_BY(mu_) = 0;
  int no_wait_commits_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t default_commit_timeout_s_ ABSL_GUARDED_BY(mu_) = 600;
};

}  // namespace ckptfs::client::testing

#endif  // CKPTFS_CLIENT_TESTING_FAKE_META_CLIENT_H_
