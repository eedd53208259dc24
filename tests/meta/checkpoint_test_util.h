// A fixture for checkpoint tests: the namespace fixture (RocksDB store on a
// manual clock) plus the checkpoint store, committer and coordinator
// (started) over it, one fake storage server registered, and helpers to
// declare, write and commit. ReopenAll() closes everything and reopens it on the same data, as
// a restarted service would.
//
// Thread-safety: test-only. Commit calls may complete on the coordinator's
// threads; CommitCall is safe to wait on from the test thread.
#ifndef CKPTFS_TESTS_META_CHECKPOINT_TEST_UTIL_H_
#define CKPTFS_TESTS_META_CHECKPOINT_TEST_UTIL_H_

#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/checkpoint/committer.h"
#include "server/meta/checkpoint/coordinator.h"
#include "server/meta/keys.h"
#include "tests/meta/fake_storage_server.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {

// One commit call's outcome, filled in by the coordinator's callback.
struct CommitCall {
  absl::Notification done;
  absl::StatusOr<CheckpointInfo> result;

  // Waits for the outcome (a generous bound only so that a broken barrier
  // fails the test instead of hanging it).
  absl::StatusOr<CheckpointInfo> Wait() {
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(120))) {
      return absl::DeadlineExceededError("commit never answered");
    }
    return result;
  }
};

class CheckpointFixture : public NamespaceFixture {
 protected:
  void SetUp() override {
    NamespaceFixture::SetUp();
    server_id_ = AddServer("uuid-storage", 1 << 30, 0, storage_.address());
    MakeCheckpointParts();
  }
  void TearDown() override { DropCheckpointParts(); }

  // `options`: the CheckpointStore's (the barrier timeout 600 s, and the
  // defaults, unless a test says).
  void MakeCheckpointParts(CheckpointStore::Options options = CheckpointStore::Options{600}) {
    ckpts_ = std::make_unique<CheckpointStore>(ckpt_kv_ != nullptr ? ckpt_kv_ : store_.get(),
                                               &ns_->inodes(), &clock_, options);
    Committer::Options commit_options;
    commit_options.sync_timeout = absl::Seconds(10);
    committer_ = std::make_unique<Committer>(ckpts_.get(), membership_.get(), commit_options);
    coordinator_ = std::make_unique<CheckpointCoordinator>(ckpts_.get(), committer_.get(), &clock_,
                                                           coordinator_options_);
    ASSERT_OK(coordinator_->Start());
  }
  void DropCheckpointParts() {
    coordinator_.reset();
    committer_.reset();
    ckpts_.reset();
  }
  // As a restart: everything closed and reopened on the same data.
  void ReopenAll() {
    DropCheckpointParts();
    Reopen();
    MakeCheckpointParts();
  }

  // user.ckptfs.keep = `keep` on run directory `run`.
  void Keep(uint64_t run, const std::string& keep) {
    SetXattrRequest request;
    request.set_ino(run);
    request.set_name(std::string(kKeepXattr));
    request.set_value(keep);
    EXPECT_OK(ns_->SetXattr(request));
  }

  // chown `ino` to `uid` (group too).
  void Chown(uint64_t ino, uint32_t uid) {
    SetAttrRequest request;
    request.set_ino(ino);
    request.set_valid(SET_UID | SET_GID);
    request.set_uid(uid);
    request.set_gid(uid);
    EXPECT_OK(ns_->SetAttr(request));
  }

  // mkdir parent/name; returns the inode.
  uint64_t Dir(uint64_t parent, const std::string& name) {
    auto dir = MakeDir(parent, name);
    EXPECT_TRUE(dir.ok()) << dir.status();
    return dir.ok() ? dir->ino() : 0;
  }

  absl::StatusOr<CheckpointInfo> Declare(uint64_t dir, uint32_t ranks, uint32_t timeout_s = 0) {
    DeclareCheckpointRequest request;
    request.set_ino(dir);
    request.set_ranks(ranks);
    request.set_timeout_s(timeout_s);
    return ckpts_->Declare(request);
  }

  // A closed file of `size` bytes (no writer left registered).
  uint64_t File(uint64_t parent, const std::string& name, uint64_t size = 1000) {
    auto file = CreateFile(parent, name);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return 0;
    if (size > 0) EXPECT_OK(ns_->CommitWrite(file->ino(), size, 0));
    return file->ino();
  }

  std::shared_ptr<CommitCall> StartCommit(uint64_t ckpt, uint32_t rank, uint32_t wait_ms = 600000) {
    auto call = std::make_shared<CommitCall>();
    coordinator_->Commit(ckpt, rank, wait_ms, [call](absl::StatusOr<CheckpointInfo> result) {
      call->result = std::move(result);
      call->done.Notify();
    });
    return call;
  }

  // A no_wait arrival (CommitCheckpointRequest.no_wait): the coordinator
  // answers it before CommitNoWait returns.
  std::shared_ptr<CommitCall> StartCommitNoWait(uint64_t ckpt, uint32_t rank) {
    auto call = std::make_shared<CommitCall>();
    coordinator_->CommitNoWait(ckpt, rank, [call](absl::StatusOr<CheckpointInfo> result) {
      call->result = std::move(result);
      call->done.Notify();
    });
    return call;
  }

  // Every rank of `ckpt` commits; returns rank 0's outcome.
  absl::StatusOr<CheckpointInfo> CommitAll(uint64_t ckpt, uint32_t ranks) {
    std::vector<std::shared_ptr<CommitCall>> calls;
    for (uint32_t rank = 0; rank < ranks; ++rank) calls.push_back(StartCommit(ckpt, rank));
    absl::StatusOr<CheckpointInfo> first = calls[0]->Wait();
    for (auto& call : calls) (void)call->Wait();
    return first;
  }

  // Declares `parent`/`name` for one rank, writes a file in it and commits.
  uint64_t Committed(uint64_t parent, const std::string& name) {
    const uint64_t ckpt = Dir(parent, name);
    EXPECT_OK(Declare(ckpt, 1));
    File(ckpt, "model.pt");
    auto info = CommitAll(ckpt, 1);
    EXPECT_TRUE(info.ok()) << info.status();
    if (info.ok()) {
      EXPECT_EQ(info->state(), COMMITTED);
    }
    return ckpt;
  }

  absl::StatusOr<std::optional<OrphanRecord>> Orphan(uint64_t ino) {
    auto stored = store_->Get(OrphanKey(ino));
    if (!stored.ok()) return stored.status();
    if (!stored->has_value()) return std::optional<OrphanRecord>();
    OrphanRecord record;
    if (!record.ParseFromString((*stored)->value)) return absl::DataLossError("orphan");
    return std::optional<OrphanRecord>(record);
  }

  InodeRecord Inode(uint64_t ino) {
    auto stored = store_->Get(InodeKey(ino));
    InodeRecord record;
    EXPECT_TRUE(stored.ok() && stored->has_value()) << "no inode " << ino;
    if (stored.ok() && stored->has_value()) record.ParseFromString((*stored)->value);
    return record;
  }

  // The KV version of inode `ino`'s record: it changes with every write.
  int64_t Version(uint64_t ino) {
    auto stored = store_->Get(InodeKey(ino));
    EXPECT_TRUE(stored.ok() && stored->has_value()) << "no inode " << ino;
    return stored.ok() && stored->has_value() ? (*stored)->version : 0;
  }

  FakeStorageServer storage_;
  uint32_t server_id_ = 0;
  CheckpointCoordinator::Options coordinator_options_;
  // The KV store the checkpoint parts use, when not the namespace's own
  // (a FaultKvStore over it); set before MakeCheckpointParts.
  KvStore* ckpt_kv_ = nullptr;
  std::unique_ptr<CheckpointStore> ckpts_;
  std::unique_ptr<Committer> committer_;
  std::unique_ptr<CheckpointCoordinator> coordinator_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_TESTS_META_CHECKPOINT_TEST_UTIL_H_
