// What the checkpoint-transaction integration tests share
// (docs/checkpoints.md): a fixture with a fresh cluster and mount per
// test, rank processes (tests/integration/checkpoint_rank.py through the
// ckptfs Python module, real processes as ranks), the checkpoint
// attributes read through the mount, and a look at the storage servers'
// chunk files to see space reclaimed.
//
// Thread-safety: not thread-safe; owned by one test.
#ifndef CKPTFS_TESTS_INTEGRATION_CHECKPOINT_SUPPORT_H_
#define CKPTFS_TESTS_INTEGRATION_CHECKPOINT_SUPPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/integration/child_process.h"
#include "tests/integration/local_cluster.h"
#include "tools/mount_transactions.h"

namespace ckptfs::testing {

// What a rank process printed.
struct RankResult {
  bool finished = false;  // exited within the wait
  int exit_status = -1;   // its exit status (0: the script ran as planned)
  std::string result;     // "ok", "error", or "" if it printed no RESULT
  std::string errname;    // "ETIMEDOUT", ... for "error"
  std::string state;      // user.ckptfs.state after the commit returned
  std::string log;        // everything it printed, for failure messages
};

// A process running checkpoint_rank.py.
class RankProcess {
 public:
  RankProcess(std::unique_ptr<ChildProcess> child) : child_(std::move(child)) {}
  pid_t pid() const { return child_->pid(); }
  bool Running() { return child_->Running(); }
  // True once the rank printed READY.
  bool Ready() const;
  // Waits until the rank printed READY (its files are written; it is about
  // to commit, or to wait to be killed). False if it exited or timed out.
  bool WaitReady(absl::Duration timeout = absl::Seconds(60));
  // Waits for the exit and parses the RESULT line.
  RankResult Wait(absl::Duration timeout = absl::Seconds(60));
  void Kill();  // SIGKILL, then reap
  std::string Log() const { return child_->LogTail(16384); }

 private:
  std::unique_ptr<ChildProcess> child_;
};

// `strace -f` attached to a running daemon, recording the system calls
// named (e.g. "syncfs"): how the tests count a storage server's syncs.
class SyscallTrace {
 public:
  // Attaches to every thread of `pid` and waits until strace says so;
  // nullptr (with the reason in `why`) if /usr/bin/strace is missing or
  // cannot attach.
  static std::unique_ptr<SyscallTrace> Attach(pid_t pid, const std::string& syscalls,
                                              const std::string& dir, std::string* why);
  // Detaches; the number of calls of `name` seen while attached.
  int StopAndCount(const std::string& name);

 private:
  SyscallTrace(std::unique_ptr<ChildProcess> strace, std::string out)
      : strace_(std::move(strace)), out_(std::move(out)) {}
  std::unique_ptr<ChildProcess> strace_;
  std::string out_;
};

// True while process `pid` is blocked in getxattr(2) or setxattr(2): a
// rank's commit waiting at the barrier.
bool BlockedInCommit(pid_t pid);

// Polls `done` every 20 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout);

// user.ckptfs.state of `dir`: "pending", "committed", "aborted", "" if it is
// no checkpoint (ENODATA), "errno <NAME>" on another error.
std::string StateOf(const std::string& dir);
// user.ckptfs.latest of run directory `dir`, same conventions as StateOf.
std::string LatestOf(const std::string& dir);
// user.ckptfs.info of `dir`, parsed; nullopt if unreadable.
std::optional<meta::CheckpointInfo> InfoOf(const std::string& dir);
// setxattr / getxattr; 0 or the errno.
int SetXattrErrno(const std::string& path, const char* name, const std::string& value);
int GetXattrErrno(const std::string& path, const std::string& name);
// The names in `dir` (readdir), sorted, without "." and "..".
std::vector<std::string> ListNames(const std::string& dir);
// st_ino of `path` (0 if stat fails): the ckptfs inode number.
uint64_t InoOf(const std::string& path);
// Chunk files of inode `ino` on all storage servers of `cluster`.
int ChunkFilesOf(const LocalCluster& cluster, uint64_t ino);
// Bytes the storage servers' chunk files take on disk (st_blocks), summed.
uint64_t StorageDiskBytes(const LocalCluster& cluster);

// Files of a checkpoint: path relative to the checkpoint directory, data.
using CheckpointFiles = std::vector<std::pair<std::string, std::string>>;
// Creates `dir`, declares it a checkpoint of one rank, writes `files` into
// it (subdirectories made as needed) and commits rank 0, all through the
// mount's attributes (no Python); the commit's status.
absl::Status CommitFiles(const std::string& dir, const CheckpointFiles& files);

class CheckpointTest : public ::testing::Test {
 protected:
  static constexpr int kStorageServers = 3;

  // A cluster of kStorageServers storage servers whose metadata service
  // reclaims every second (what the tests wait for when space is returned)
  // and cuts files into 1 MiB chunks (a 3 MiB file touches every server),
  // and one mount; RunDir() created.
  void SetUp() override;
  void TearDown() override;

  LocalCluster& cluster() { return *cluster_; }
  const std::string& mnt() const { return mnt_; }
  std::string RunDir() const { return mnt_ + "/run"; }

  // Starts `checkpoint_rank.py args...` (log under the cluster's root).
  std::unique_ptr<RankProcess> StartRank(const std::vector<std::string>& args);
  // Starts `save DIR RANK extra...`.
  std::unique_ptr<RankProcess> StartSave(const std::string& dir, int rank,
                                         const std::vector<std::string>& extra = {});
  // Runs `checkpoint_rank.py verify DIR extra...`; its output.
  std::string Verify(const std::string& dir, const std::vector<std::string>& extra);
  // Runs `checkpoint_rank.py call FUNC ARGS...` (the Python module's
  // function); its output, "CALL ok JSON" or "CALL error errno=NAME ...".
  std::string CallModule(const std::vector<std::string>& func_and_args);
  // Declares, writes with `ranks` processes and commits `dir`; true if
  // every rank got "ok". `extra` goes to every rank.
  bool SaveCheckpoint(const std::string& dir, int ranks,
                      const std::vector<std::string>& extra = {});
  // Runs the `ckptfs` command line; its exit status, output into `output`.
  int Ckptfs(const std::string& args, std::string* output);

  // Everything a failing test should show.
  std::string Logs();

  // More ckptfs-meta flags for SetUp's cluster (e.g. a short
  // --orphan_grace_s); a derived fixture sets them in its constructor.
  std::vector<std::string> extra_meta_flags_;
  // LocalClusterOptions::storage_disk_mib for SetUp's cluster.
  int storage_disk_mib_ = 0;

 private:
  std::unique_ptr<LocalCluster> cluster_;
  std::string mnt_;
  int ranks_started_ = 0;
  std::vector<std::string> rank_logs_;
};

}  // namespace ckptfs::testing

#endif  // CKPTFS_TESTS_INTEGRATION_CHECKPOINT_SUPPORT_H_
