// CheckpointCoordinator: the running checkpoint service — the commit
// barriers of PENDING checkpoints, their timeouts, and the worker that
// commits a checkpoint once all its ranks arrived. The gRPC service calls
// it for the five checkpoint RPCs and for failed writes.
//
// Threads: none per waiting rank. A commit call records the arrival (a KV
// transaction on the caller's thread), then leaves a callback in the
// checkpoint's Barrier and returns (a no_wait arrival leaves none: it is
// answered PENDING at once, for clients that hold one long poll per
// checkpoint for all their ranks); the callback runs later on whichever
// thread ends the barrier:
//   - the commit workers (Options::commit_threads): Committer::Run for each
//     checkpoint whose ranks all arrived (verify, SYNC storage servers,
//     commit). Checkpoints of different run directories commit at once, so
//     a storage server slow to answer a SYNC holds back only the commits
//     that need it; those of one run directory commit one after another,
//     in the order their last rank arrived, so that each one's retention
//     sees the ones before it committed;
//   - the timer thread: long polls that ran out (answered PENDING) and
//     barriers past their deadline (aborted, ETIMEDOUT);
//   - the caller of WriteFailed or Remove (abort EIO / removal);
//   - with a shared store, the store poll thread (below).
// Ending a checkpoint (Conclude) answers every waiter, drops the arrival
// records, and after a commit applies the run directory's retention. Many
// waiters (a large checkpoint's long polls) are answered by the ending
// thread together with a small AnswerPool the coordinator owns: each answer
// is a gRPC Finish whose send work runs on the answering thread.
//
// Several metadata servers on one store (Options::shared_poll > 0, e.g.
// ckptfs-meta --etcd_shared): ranks of one checkpoint may arrive through
// different servers, and each server's Barrier counts only the arrivals it
// saw. The store decides: a poll thread looks every shared_poll at each open
// barrier (one inode read and one count of the stored arrivals) and, after
// a new rank arrived here (not a renewed long poll), at once at the
// barriers that had one. A look that finds the checkpoint ended
// (another server committed or aborted it) answers the waiters here with
// that outcome. One that finds every rank stored loads the stored arrivals
// and queues the commit — right away when a rank arrived here since the
// last look (this server most likely stored the last arrival), else only if
// the next look still finds it pending (the server that stored the last
// arrival died or is slow). Several servers may still run the commit; the
// commit and abort transactions compare the checkpoint's PENDING state, so
// one applies and the others find it COMMITTED (or ABORTED, or REMOVING
// once a name in it was removed) and answer their waiters with it. A barrier past its deadline
// loads the stored arrivals before it aborts (and commits instead if they are all there). Only the
// server whose commit or abort transaction applied (the store says so:
// CheckpointStore::Ended::applied) counts it in the metrics, logs it as committed, applies the run
// directory's retention and wakes the orphan reclaimer; a server that lost the race, even one whose
// commit ran to the end after a slow SYNC, only answers its waiters (retention there would count
// the loser's checkpoint as the newest and could remove a newer one committed meanwhile). Every
// server that sees the end drops the arrival records (the ending server may have died before it
// did).
//
// Metrics (the default registry): ckptfs_meta_checkpoint_barriers_open,
// ckptfs_meta_checkpoint_ranks_arrived and ckptfs_meta_checkpoint_waiting_commits
// (computed at scrape time), ckptfs_meta_checkpoints_committed_total,
// ckptfs_meta_checkpoints_aborted_total and ckptfs_meta_checkpoint_commit_seconds
// (from the last rank's arrival to the last waiting commit answered).
//
// Thread-safety: thread-safe. Lock order: mu_ is never held across a KV
// call, a storage call or a callback; the metrics registry's callback mutex
// comes before it (a scrape reads the barriers under mu_). CheckpointStore,
// Committer and Clock are borrowed and must outlive the coordinator.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_COORDINATOR_H_
#define CKPTFS_SERVER_META_CHECKPOINT_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "proto/meta.pb.h"
#include "server/meta/checkpoint/answer_pool.h"
#include "server/meta/checkpoint/barrier.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/checkpoint/committer.h"
#include "server/meta/clock.h"

namespace ckptfs::meta {

// The status a commit gets while the service is stopping: UNAVAILABLE with
// no errno, so that gRPC clients treat it as a lost connection and retry.
absl::Status ServiceStoppingError();
bool IsServiceStoppingError(const absl::Status& status);

class CheckpointCoordinator {
 public:
  using Done = Barrier::Done;
  struct Options {
    absl::Duration default_poll = absl::Seconds(20);  // CommitCheckpoint wait_ms 0
    absl::Duration max_poll = absl::Minutes(5);
    // After the KV store failed to commit or abort a checkpoint.
    absl::Duration retry_delay = absl::Seconds(1);
    // Failed commit attempts of one checkpoint (every rank arrived) before
    // it is aborted with EIO instead of retried.
    int max_commit_attempts = 30;
    // The timer thread looks at least this often (the clock may be moved
    // by a test rather than by time).
    absl::Duration max_timer_sleep = absl::Seconds(1);
    // Threads that help answer a barrier's waiting commits when it ends
    // (0: the ending thread answers them all).
    int answer_threads = 3;
    // Checkpoints committed at once (each of another run directory); at
    // least 1.
    int commit_threads = 4;
    // Other metadata servers serve the same store: how often the store poll
    // thread looks at the open barriers (see the file comment). Zero: this
    // is the only server, the barriers are the truth, and there is no poll.
    absl::Duration shared_poll = absl::ZeroDuration();
    // With shared_poll and set_adopt_pending(true): how often the poll
    // thread looks for PENDING checkpoints without a barrier here.
    absl::Duration adopt_every = absl::Seconds(5);
  };

  CheckpointCoordinator(CheckpointStore* store, Committer* committer, Clock* clock,
                        const Options& options)
      : store_(store),
        committer_(committer),
        clock_(clock),
        options_(options),
        answer_pool_(options.answer_threads) {}
  CheckpointCoordinator(const CheckpointCoordinator&) = delete;
  CheckpointCoordinator& operator=(const CheckpointCoordinator&) = delete;
  ~CheckpointCoordinator() { Stop(); }

  // Called, on the thread that ended it, after an abort or removal made
  // checkpoint files orphans due now (MetaServer wakes the orphan
  // reclaimer). Set before Start.
  void set_on_orphans(std::function<void()> on_orphans) { on_orphans_ = std::move(on_orphans); }

  // Resumes every PENDING checkpoint the store lists (its arrivals, its
  // deadline, its commit if all ranks arrived) and starts the threads. Call
  // once, before serving.
  absl::Status Start();
  // Answers every waiting commit with ServiceStoppingError, refuses later
  // ones the same way and joins the threads (a commit in progress finishes
  // first). Idempotent.
  void Stop();

  absl::StatusOr<CheckpointInfo> Declare(const DeclareCheckpointRequest& request) {
    return store_->Declare(request);
  }
  // Rank `rank` commits checkpoint `ino`: the arrival is stored, then `done`
  // runs once the checkpoint ends (COMMITTED; ABORTED as AbortedStatus;
  // REMOVING, committed and partly deleted since, as ENOENT), or
  // with the PENDING checkpoint when `wait_ms` (0: default_poll) passes
  // first. `done` may run on this thread before Commit returns (an error, or
  // a checkpoint already ended).
  void Commit(uint64_t ino, uint32_t rank, uint32_t wait_ms, Done done);
  // Rank `rank` commits checkpoint `ino` without waiting (the request's
  // no_wait: a client whose ranks share one long poll): the arrival is
  // stored and counted into the barrier exactly as by Commit (completing it
  // queues the commit), but `done` runs before this returns, with the
  // checkpoint PENDING (arrived as the barrier counts it, this rank
  // included; arrived == ranks once the barrier is complete and its commit
  // queued or running), or its outcome if it already ended (as for Commit),
  // or an error.
  void CommitNoWait(uint64_t ino, uint32_t rank, Done done);
  absl::StatusOr<CheckpointInfo> Get(uint64_t ino) { return store_->Get(ino); }
  absl::StatusOr<ListCheckpointsReply> List(uint64_t run_dir) { return store_->List(run_dir); }
  // Removes checkpoint `name` of `run_dir`; commits waiting on it fail
  // (ENOENT). With `only`: while it is still that checkpoint in that state
  // (ESTALE otherwise; CheckpointStore::Remove).
  absl::Status Remove(uint64_t run_dir, absl::string_view name,
                      const CheckpointStore::RemoveOnly* only = nullptr);
  // A write to file `ino` failed (it is already marked damaged): the PENDING
  // checkpoint holding it aborts now, EIO. OK when there is none.
  absl::Status WriteFailed(uint64_t ino);

  // Shared store only (shared_poll > 0): whether this server holds the
  // cluster duties. While it does, the store poll thread, at once and then
  // every adopt_every, opens a barrier for each PENDING checkpoint that has
  // a first arrival but no barrier here (its ranks arrived through a server
  // that died and never came back), so that the barrier's deadline commits
  // or aborts it here. An adopted barrier starts with no arrivals counted:
  // the looks at the store count them, and commit a complete one only if
  // two looks in a row find it still pending (its own server may be alive
  // and committing it). Any thread.
  void set_adopt_pending(bool adopt);
  // One pass of that adoption, now, on the caller's thread (for tests).
  absl::Status AdoptPending();

  // One pass of the timer thread's work, now, on the caller's thread (for
  // tests that move a ManualClock).
  void RunTimers();
  // One look of the store poll thread at every open barrier, now, on the
  // caller's thread (shared_poll > 0 only; for tests).
  void LookAtStore();

 private:
  // Commit and CommitNoWait: `wait` is the long poll, nullopt for no_wait.
  void Arrive(uint64_t ino, uint32_t rank, std::optional<absl::Duration> wait, Done done);
  // The timer pass: returns when the next one is due.
  absl::Time TimerPass();
  void TimerLoop();
  void CommitLoop();
  // Commits `ino` (its ranks all arrived) and concludes it, or schedules a
  // retry, or aborts it after too many failures.
  void CommitOne(uint64_t ino);
  void StorePollLoop();
  // A look of the store poll thread: at every open barrier, or only at
  // those a new rank arrived at since the last look. Returns early once
  // Stop began.
  void Look(bool only_new_arrivals);
  // Counts the stored arrivals of `ino` into its barrier; whether it is
  // complete now (false when there is no barrier), or the store's error.
  absl::StatusOr<bool> LoadStoredArrivals(uint64_t ino);
  // Aborts `ino` in the store and concludes it; on a store failure the
  // barrier retries after retry_delay.
  void AbortNow(uint64_t ino, int err, const std::string& reason);
  // When the commit worker ran a checkpoint's commit and the CPU time it
  // took, for the release log (on a loaded machine the two differ).
  struct CommitTiming {
    absl::Time started;
    absl::Time finished;
    absl::Duration cpu;
  };
  // `ino` ended as `info` (COMMITTED, ABORTED, or already REMOVING when
  // another server committed it): answers its waiters, drops its arrival
  // records, applies retention after a commit. Harmless twice.
  // `seen_only`: this server's transaction did not end it (another metadata
  // server's did, or this one's earlier): only the waiters are answered and
  // the arrival records dropped here.
  void Conclude(uint64_t ino, const CheckpointInfo& info,
                std::optional<CommitTiming> timing = std::nullopt, bool seen_only = false);
  // Forgets `ino`'s barrier, answering its waiters with `status`.
  void Forget(uint64_t ino, const absl::Status& status);
  // Runs every waiter's callback with `result` (on answer_pool_ when many);
  // returns the CPU time that took.
  absl::Duration Answer(std::vector<Barrier::Waiter>& waiters,
                        const absl::StatusOr<CheckpointInfo>& result);
  // Queues `ino`'s commit. REQUIRES: mu_ held.
  void QueueCommit(uint64_t ino, Barrier& barrier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnOrphans();

  CheckpointStore* const store_;
  Committer* const committer_;
  Clock* const clock_;
  const Options options_;
  // Used by Conclude, Forget and Stop; outlives the threads below (Stop
  // joins them first).
  AnswerPool answer_pool_;
  std::function<void()> on_orphans_;

  // Held by a commit worker from taking a checkpoint off commit_queue_ to
  // claiming its run directory in committing_runs_ (across one KV read,
  // which mu_ never is): claims follow the queue's order. Before mu_.
  absl::Mutex dispatch_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex mu_;
  std::map<uint64_t, std::unique_ptr<Barrier>> barriers_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> commit_queue_ ABSL_GUARDED_BY(mu_);
  // Run directories a worker is committing a checkpoint of (0: those whose
  // run directory could not be read), and the checkpoints of each waiting
  // for it to finish (in queue order).
  std::map<uint64_t, std::deque<uint64_t>> committing_runs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  // Set when the timer thread should look again before its planned time.
  bool timer_poked_ ABSL_GUARDED_BY(mu_) = false;
  // Set when a new rank arrived here (shared store): the poll looks at once
  // at the barriers that had one.
  bool store_poked_ ABSL_GUARDED_BY(mu_) = false;
  // set_adopt_pending, and when the poll thread adopts next.
  bool adopt_pending_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_adopt_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread timer_thread_;
  std::vector<std::thread> commit_threads_;
  std::thread store_poll_thread_;  // shared_poll > 0 only
  // The scrape-time barrier gauges; dropped by Stop (before barriers_ goes).
  std::vector<metrics::CallbackHandle> metric_callbacks_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_COORDINATOR_H_
