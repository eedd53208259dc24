// See coordinator.h.
#include "server/meta/checkpoint/coordinator.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::meta {
namespace {

constexpr char kStoppingPayloadUrl[] = "ckptfs/meta-stopping";
constexpr size_t kMissingRanksNamed = 8;

std::string TimeoutReason(const Barrier& barrier) {
  const CheckpointInfo& info = barrier.info();
  std::string reason = absl::StrCat("checkpoint ", info.name(), " timed out: ", barrier.arrived(),
                                    " of ", info.ranks(), " ranks committed within ",
                                    info.timeout_s(), " s of the first commit");
  const std::vector<uint32_t> missing = barrier.Missing(kMissingRanksNamed);
  if (!missing.empty()) {
    absl::StrAppend(&reason, " (missing rank", missing.size() > 1 ? "s " : " ",
                    absl::StrJoin(missing, ", "),
                    info.ranks() - barrier.arrived() > missing.size() ? ", ..." : "", ")");
  }
  return reason;
}

// CPU time of the calling thread so far (zero if the clock is missing).
absl::Duration ThreadCpuTime() { return AnswerPool::ThreadCpuTime(); }

struct CheckpointMetrics {
  metrics::Counter& committed;
  metrics::Counter& aborted;
  metrics::Histogram& commit_latency;
  metrics::Gauge& open_barriers;
  metrics::Gauge& ranks_arrived;
  metrics::Gauge& waiting_commits;
};

CheckpointMetrics& Metrics() {
  static CheckpointMetrics* m = [] {
    metrics::Registry& r = metrics::Registry::Default();
    return new CheckpointMetrics{
        r.Counter("ckptfs_meta_checkpoints_committed_total", "Checkpoints committed.", {})
            .WithLabels({}),
        r.Counter("ckptfs_meta_checkpoints_aborted_total",
                  "Checkpoints aborted (timeout, failed write, failed commit).", {})
            .WithLabels({}),
        r.Histogram("ckptfs_meta_checkpoint_commit_seconds",
                    "A committed checkpoint's barrier: from its last rank's arrival to its "
                    "last waiting commit answered (verify, storage SYNC and record included).",
                    {}, metrics::LatencyBuckets())
            .WithLabels({}),
        r.Gauge("ckptfs_meta_checkpoint_barriers_open",
                "Pending checkpoints with a commit barrier in this service.", {})
            .WithLabels({}),
        r.Gauge("ckptfs_meta_checkpoint_ranks_arrived",
                "Ranks arrived at the open commit barriers.", {})
            .WithLabels({}),
        r.Gauge("ckptfs_meta_checkpoint_waiting_commits",
                "Commit calls (long polls) waiting at the open barriers.", {})
            .WithLabels({}),
    };
  }();
  return *m;
}

// How a waiter learns that the checkpoint ended as `info`. A REMOVING one
// committed, but names in it have been removed since: no longer valid, as
// if it had been removed whole.
absl::StatusOr<CheckpointInfo> Outcome(CheckpointInfo info) {
  if (info.state() == ABORTED) return AbortedStatus(info);
  if (info.state() == REMOVING) {
    return ErrnoStatus(ENOENT, absl::StrCat("checkpoint ", info.name(),
                                            " committed, but it is being removed since "
                                            "(a name in it was unlinked or rmdir'ed)"));
  }
  if (info.state() == COMMITTED) info.set_arrived(info.ranks());
  return info;
}

}  // namespace

absl::Status ServiceStoppingError() {
  absl::Status status =
      absl::UnavailableError("the metadata service is shutting down; commit again");
  status.SetPayload(kStoppingPayloadUrl, absl::Cord("1"));
  return status;
}

bool IsServiceStoppingError(const absl::Status& status) {
  return status.GetPayload(kStoppingPayloadUrl).has_value();
}

absl::Status CheckpointCoordinator::Start() {
  absl::StatusOr<std::vector<uint64_t>> pending = store_->Pending();
  if (!pending.ok()) return pending.status();
  size_t resumed = 0;
  for (uint64_t ino : *pending) {
    absl::StatusOr<CheckpointInfo> info = store_->Get(ino);
    if (!info.ok()) {
      CKPTFS_LOG(kWarning) << "cannot resume checkpoint " << ino << ": " << info.status().message();
      continue;
    }
    if (info->state() != PENDING || info->first_commit_ms() == 0) continue;
    absl::StatusOr<std::vector<uint32_t>> arrivals = store_->Arrivals(ino);
    if (!arrivals.ok()) return arrivals.status();
    absl::MutexLock lock(&mu_);
    auto& barrier = barriers_[ino];
    barrier = std::make_unique<Barrier>(*info, *arrivals);
    if (barrier->complete()) QueueCommit(ino, *barrier);
    ++resumed;
    CKPTFS_LOG(kInfo) << "resumed the commit barrier of checkpoint " << info->name() << " (inode "
                      << ino << "): " << barrier->arrived() << " of " << info->ranks()
                      << " ranks arrived";
  }
  {
    absl::MutexLock lock(&mu_);
    started_ = true;
  }
  CheckpointMetrics& m = Metrics();
  metrics::Registry& registry = metrics::Registry::Default();
  // Sums over the barriers, read under mu_ at scrape time.
  auto sum = [this](auto field) {
    return [this, field]() -> double {
      absl::MutexLock lock(&mu_);
      double total = 0;
      for (const auto& [ino, barrier] : barriers_) total += field(*barrier);
      return total;
    };
  };
  metric_callbacks_.push_back(
      registry.AddGaugeCallback(m.open_barriers, sum([](const Barrier&) { return 1.0; })));
  metric_callbacks_.push_back(registry.AddGaugeCallback(
      m.ranks_arrived, sum([](const Barrier& b) { return double(b.arrived()); })));
  metric_callbacks_.push_back(registry.AddGaugeCallback(
      m.waiting_commits, sum([](const Barrier& b) { return double(b.waiters()); })));
  timer_thread_ = std::thread([this] { TimerLoop(); });
  for (int i = 0; i < std::max(options_.commit_threads, 1); ++i) {
    commit_threads_.emplace_back([this] { CommitLoop(); });
  }
  if (options_.shared_poll > absl::ZeroDuration()) {
    store_poll_thread_ = std::thread([this] { StorePollLoop(); });
  }
  return absl::OkStatus();
}

void CheckpointCoordinator::Stop() {
  metric_callbacks_.clear();
  std::vector<Barrier::Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [ino, barrier] : barriers_) {
      for (Barrier::Waiter& waiter : barrier->TakeAll()) waiters.push_back(std::move(waiter));
    }
  }
  // Answered before the join: a commit in progress may take a while.
  Answer(waiters, ServiceStoppingError());
  if (timer_thread_.joinable()) timer_thread_.join();
  for (std::thread& thread : commit_threads_) thread.join();
  commit_threads_.clear();
  if (store_poll_thread_.joinable()) store_poll_thread_.join();
}

void CheckpointCoordinator::QueueCommit(uint64_t ino, Barrier& barrier) {
  barrier.ending = true;
  barrier.retry_at.reset();
  commit_queue_.push_back(ino);
}

void CheckpointCoordinator::Commit(uint64_t ino, uint32_t rank, uint32_t wait_ms, Done done) {
  const absl::Duration wait = wait_ms == 0 ? options_.default_poll
                                           : std::clamp(absl::Milliseconds(wait_ms),
                                                        absl::Milliseconds(1), options_.max_poll);
  Arrive(ino, rank, wait, std::move(done));
}

void CheckpointCoordinator::CommitNoWait(uint64_t ino, uint32_t rank, Done done) {
  Arrive(ino, rank, std::nullopt, std::move(done));
}

void CheckpointCoordinator::Arrive(uint64_t ino, uint32_t rank, std::optional<absl::Duration> wait,
                                   Done done) {
  bool refused = false;
  {
    absl::MutexLock lock(&mu_);
    refused = stopping_;
  }
  if (refused) {  // answered outside mu_, like every answer
    done(ServiceStoppingError());
    return;
  }
  absl::StatusOr<CheckpointInfo> info = store_->Arrive(ino, rank);
  if (!info.ok()) {
    done(info.status());
    return;
  }
  if (info->state() != PENDING) {
    done(Outcome(*std::move(info)));
    return;
  }
  // The first arrival this process sees creates the barrier at once and
  // counts the stored arrivals in afterwards, outside the lock: the ranks
  // arriving meanwhile join the new barrier instead of each scanning the
  // store.
  const Barrier* created = nullptr;
  bool stopping = false;
  // A no_wait arrival's answer, given once the lock is released.
  std::optional<CheckpointInfo> pending;
  {
    absl::MutexLock lock(&mu_);
    stopping = stopping_;
    if (!stopping) {
      std::unique_ptr<Barrier>& barrier = barriers_[ino];
      if (barrier == nullptr) {
        barrier = std::make_unique<Barrier>(*info, std::vector<uint32_t>());
        barrier->loaded = false;
        created = barrier.get();
      }
      const bool counted = barrier->Arrive(rank);
      if (options_.shared_poll > absl::ZeroDuration() && counted) {
        // Other servers may hold the other arrivals: the store decides. A
        // renewed long poll (the rank counted already) changes nothing
        // there and waits for the periodic look.
        barrier->arrived_since_look = true;
        if (!barrier->complete()) store_poked_ = true;
      }
      const absl::Time now = absl::Now();
      absl::Time due = absl::InfiniteFuture();
      if (wait.has_value()) {
        due = now + *wait;
        barrier->AddWaiter(due, Barrier::Waiter{rank, std::move(done)});
      }
      if (barrier->loaded && barrier->complete() && !barrier->ending) {
        QueueCommit(ino, *barrier);
      }
      // The timer thread looks at least every max_timer_sleep; poke it only
      // for something due sooner.
      if (std::optional<int64_t> deadline = barrier->deadline_ms(); deadline.has_value()) {
        due = std::min(due, now + absl::Milliseconds(*deadline - clock_->NowMs()));
      }
      if (due < now + options_.max_timer_sleep) timer_poked_ = true;
      if (!wait.has_value() && created == nullptr) pending = barrier->Snapshot();
    }
  }
  if (stopping) {
    done(ServiceStoppingError());
    return;
  }
  if (created == nullptr) {
    if (pending.has_value()) done(*std::move(pending));
    return;
  }
  // From here on `done` is still ours only for a no_wait arrival.
  auto answer = [&](absl::StatusOr<CheckpointInfo> result) {
    if (!wait.has_value()) done(std::move(result));
  };
  absl::StatusOr<std::vector<uint32_t>> arrivals = store_->Arrivals(ino);
  if (!arrivals.ok()) {
    Forget(ino, arrivals.status());
    answer(arrivals.status());
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = barriers_.find(ino);
    if (it != barriers_.end() && it->second.get() == created) {
      Barrier& barrier = *it->second;
      for (uint32_t arrived : *arrivals) {
        if (arrived < barrier.info().ranks()) barrier.Arrive(arrived);
      }
      barrier.loaded = true;
      if (barrier.complete() && !barrier.ending) QueueCommit(ino, barrier);
      if (!wait.has_value()) pending = barrier.Snapshot();
    }
  }
  // The checkpoint may have ended between the arrival and the new barrier
  // (whoever ended it found no barrier to answer): look again.
  absl::StatusOr<CheckpointInfo> now = store_->Get(ino);
  if (!now.ok()) {
    Forget(ino, now.status());
    answer(now.status());
  } else if (now->state() != PENDING) {
    // Ended by another server, or by this one's commit worker once the
    // barrier existed (which concluded it fully): answers only.
    Conclude(ino, *now, std::nullopt, /*seen_only=*/true);
    answer(Outcome(*now));
  } else {
    answer(pending.has_value() ? *std::move(pending) : *std::move(now));
  }
}

absl::Time CheckpointCoordinator::TimerPass() {
  std::vector<std::pair<Barrier::Waiter, CheckpointInfo>> expired;
  std::vector<std::pair<uint64_t, std::string>> aborts;
  const absl::Time now = absl::Now();
  const int64_t now_ms = clock_->NowMs();
  absl::Time next = now + options_.max_timer_sleep;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [ino, barrier] : barriers_) {
      for (Barrier::Waiter& waiter : barrier->TakeExpired(now)) {
        expired.emplace_back(std::move(waiter), barrier->Snapshot());
      }
      if (std::optional<absl::Time> poll = barrier->next_poll_deadline(); poll.has_value()) {
        next = std::min(next, *poll);
      }
      if (barrier->ending) continue;
      if (barrier->retry_at.has_value() && *barrier->retry_at > now) {
        next = std::min(next, *barrier->retry_at);
        continue;
      }
      if (!barrier->loaded) continue;
      if (barrier->complete()) {  // its commit failed before: again
        QueueCommit(ino, *barrier);
        continue;
      }
      std::optional<int64_t> deadline = barrier->deadline_ms();
      if (!deadline.has_value()) continue;
      if (*deadline <= now_ms) {
        barrier->ending = true;
        aborts.emplace_back(ino, TimeoutReason(*barrier));
      } else {
        next = std::min(next, now + absl::Milliseconds(*deadline - now_ms));
      }
    }
  }
  for (auto& [waiter, info] : expired) waiter.done(std::move(info));
  for (auto& [ino, reason] : aborts) {
    if (options_.shared_poll > absl::ZeroDuration()) {
      {
        // The store may be down (etcd lost): do not keep trying through the
        // rest of the list once Stop began.
        absl::MutexLock lock(&mu_);
        if (stopping_) break;
      }
      // This server counted only the ranks that arrived here: the stored
      // state and arrivals decide between a commit and a timeout, and name
      // the missing ranks (unless another server ended it already). When
      // the store cannot say, the barrier looks again after retry_delay: a
      // transient store error must not abort a complete checkpoint.
      absl::StatusOr<CheckpointInfo> stored = store_->Get(ino);
      if (stored.ok() && stored->state() != PENDING) {
        Conclude(ino, *stored, std::nullopt, /*seen_only=*/true);
        continue;
      }
      absl::StatusOr<bool> complete =
          stored.ok() ? LoadStoredArrivals(ino) : absl::StatusOr<bool>(stored.status());
      absl::MutexLock lock(&mu_);
      auto it = barriers_.find(ino);
      if (it == barriers_.end()) continue;
      const int err = complete.ok() ? 0 : ErrnoFromStatus(complete.status());
      if (err == ENOENT || err == EINVAL || err == ENOTDIR) {  // removed: AbortNow forgets it
        complete = false;
      }
      if (!complete.ok()) {
        CKPTFS_LOG(kWarning) << "checkpoint " << it->second->info().name() << " (" << ino
                             << ") is past its deadline but the store cannot say whether all "
                             << "its ranks arrived; looking again in "
                             << absl::FormatDuration(options_.retry_delay) << ": "
                             << complete.status().message();
        it->second->ending = false;
        it->second->retry_at = absl::Now() + options_.retry_delay;
        continue;
      }
      if (*complete) {
        QueueCommit(ino, *it->second);
        continue;
      }
      reason = TimeoutReason(*it->second);
    }
    CKPTFS_LOG(kWarning) << reason;
    AbortNow(ino, ETIMEDOUT, reason);
  }
  return next;
}

void CheckpointCoordinator::RunTimers() { TimerPass(); }

absl::StatusOr<bool> CheckpointCoordinator::LoadStoredArrivals(uint64_t ino) {
  absl::StatusOr<std::vector<uint32_t>> arrivals = store_->Arrivals(ino);
  if (!arrivals.ok()) {
    CKPTFS_LOG(kWarning) << "cannot read the arrivals of checkpoint " << ino << ": "
                         << arrivals.status().message();
    return arrivals.status();
  }
  absl::MutexLock lock(&mu_);
  auto it = barriers_.find(ino);
  if (it == barriers_.end()) return false;
  for (uint32_t rank : *arrivals) it->second->Arrive(rank);
  return it->second->complete();
}

void CheckpointCoordinator::LookAtStore() { Look(/*only_new_arrivals=*/false); }

void CheckpointCoordinator::Look(bool only_new_arrivals) {
  // The open barriers not being ended here, and whether a new rank arrived
  // here since the last look.
  std::vector<std::pair<uint64_t, bool>> open;
  {
    absl::MutexLock lock(&mu_);
    store_poked_ = false;
    for (auto& [ino, barrier] : barriers_) {
      if (barrier->ending || !barrier->loaded) continue;
      if (only_new_arrivals && !barrier->arrived_since_look) continue;
      open.emplace_back(ino, barrier->arrived_since_look);
      barrier->arrived_since_look = false;
    }
  }
  for (const auto& [ino, arrived_here] : open) {
    {
      // The store may be down (etcd lost): Stop must not wait for a call
      // per open barrier.
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    absl::StatusOr<CheckpointInfo> info = store_->Get(ino);
    if (!info.ok()) {
      const int err = ErrnoFromStatus(info.status());
      if (err == ENOENT || err == EINVAL || err == ENOTDIR) {  // removed meanwhile
        Forget(ino, info.status());
      } else {
        CKPTFS_LOG(kDebug) << "cannot look at checkpoint " << ino
                           << " in the store: " << info.status().message();
      }
      continue;
    }
    if (info->state() != PENDING) {  // another server ended it
      Conclude(ino, *info, std::nullopt, /*seen_only=*/true);
      continue;
    }
    bool commit_now = false;
    {
      absl::MutexLock lock(&mu_);
      auto it = barriers_.find(ino);
      if (it == barriers_.end() || it->second->ending) continue;
      Barrier& barrier = *it->second;
      if (info->arrived() < info->ranks()) {
        barrier.stored_complete_looks = 0;
        continue;
      }
      commit_now = arrived_here || ++barrier.stored_complete_looks >= 2;
    }
    if (!commit_now) continue;
    // A store error: the next look tries again.
    if (absl::StatusOr<bool> complete = LoadStoredArrivals(ino); !complete.ok() || !*complete) {
      continue;
    }
    absl::MutexLock lock(&mu_);
    auto it = barriers_.find(ino);
    if (it != barriers_.end() && it->second->complete() && !it->second->ending && !stopping_) {
      QueueCommit(ino, *it->second);
    }
  }
}

void CheckpointCoordinator::set_adopt_pending(bool adopt) {
  absl::MutexLock lock(&mu_);
  adopt_pending_ = adopt;
  next_adopt_ = absl::InfinitePast();
  store_poked_ = true;  // adopt at once
}

absl::Status CheckpointCoordinator::AdoptPending() {
  absl::StatusOr<std::vector<uint64_t>> pending = store_->Pending();
  if (!pending.ok()) return pending.status();
  for (uint64_t ino : *pending) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return absl::OkStatus();
      if (barriers_.count(ino) != 0) continue;
    }
    absl::StatusOr<CheckpointInfo> info = store_->Get(ino);
    if (!info.ok()) continue;  // removed meanwhile, or the store failed: next time
    if (info->state() != PENDING || info->first_commit_ms() == 0) continue;
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::OkStatus();
    std::unique_ptr<Barrier>& barrier = barriers_[ino];
    if (barrier != nullptr) continue;  // a rank arrived here meanwhile
    barrier = std::make_unique<Barrier>(*info, std::vector<uint32_t>());
    timer_poked_ = true;  // its deadline may have passed
    CKPTFS_LOG(kInfo) << "watching checkpoint " << info->name() << " (inode " << ino
                      << "), pending with no barrier here: " << info->arrived() << " of "
                      << info->ranks() << " ranks arrived";
  }
  return absl::OkStatus();
}

void CheckpointCoordinator::StorePollLoop() {
  // Looks at every open barrier every shared_poll; in between, after a new
  // rank arrived here, at only the barriers that had one, but not more
  // often than every shared_poll / 8 (a storm of arrivals would otherwise
  // double the store's load).
  const absl::Duration min_gap = options_.shared_poll / 8;
  absl::Time swept = absl::InfinitePast();
  while (true) {
    const absl::Time looked = absl::Now();
    const bool sweep = looked >= swept + options_.shared_poll;
    if (sweep) swept = looked;
    Look(/*only_new_arrivals=*/!sweep);
    bool adopt = false;
    {
      absl::MutexLock lock(&mu_);
      if (adopt_pending_ && looked >= next_adopt_) {
        adopt = true;
        next_adopt_ = looked + options_.adopt_every;
      }
    }
    if (adopt) {
      if (absl::Status adopted = AdoptPending(); !adopted.ok()) {
        CKPTFS_LOG(kWarning) << "cannot list the pending checkpoints: " << adopted.message();
      }
    }
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithDeadline(absl::Condition(&stopping), looked + min_gap);
    auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || store_poked_; };
    mu_.AwaitWithDeadline(absl::Condition(&woken), swept + options_.shared_poll);
    if (stopping_) return;
  }
}

void CheckpointCoordinator::TimerLoop() {
  while (true) {
    const absl::Time next = TimerPass();
    absl::MutexLock lock(&mu_);
    auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || timer_poked_; };
    mu_.AwaitWithDeadline(absl::Condition(&woken), next);
    timer_poked_ = false;
    if (stopping_) return;
  }
}

void CheckpointCoordinator::CommitLoop() {
  while (true) {
    uint64_t ino = 0;
    uint64_t run = 0;  // 0: its run directory could not be read
    {
      // Taking a checkpoint off the queue and claiming its run directory
      // is one step for one worker at a time, so that the checkpoints of a
      // run directory are claimed in the order they were queued.
      absl::MutexLock dispatch(&dispatch_mu_);
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return stopping_ || !commit_queue_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (stopping_) return;
        ino = commit_queue_.front();
        commit_queue_.pop_front();
      }
      // (The commit reports a run directory that cannot be read.)
      absl::StatusOr<uint64_t> run_dir = store_->RunDirOf(ino);
      if (run_dir.ok()) run = *run_dir;
      absl::MutexLock lock(&mu_);
      auto [it, first] = committing_runs_.try_emplace(run);
      if (!first) {
        // A worker commits one of this run directory now: it commits this
        // one next.
        it->second.push_back(ino);
        continue;
      }
    }
    while (ino != 0) {
      CommitOne(ino);
      absl::MutexLock lock(&mu_);
      auto it = committing_runs_.find(run);
      if (stopping_ || it->second.empty()) {
        committing_runs_.erase(it);
        ino = 0;
      } else {
        ino = it->second.front();
        it->second.pop_front();
      }
    }
  }
}

void CheckpointCoordinator::CommitOne(uint64_t ino) {
  const absl::Time started = absl::Now();
  const absl::Duration started_cpu = ThreadCpuTime();
  absl::StatusOr<CheckpointStore::Ended> ended = committer_->Run(ino);
  if (ended.ok() && ended->info.state() != PENDING) {
    // Counted, logged and retained only by the server whose transaction
    // ended it: a server that lost the race (another server on the same
    // store committed or aborted it first) only answers its waiters.
    if (ended->applied) {
      (ended->info.state() == COMMITTED ? Metrics().committed : Metrics().aborted).Increment();
    }
    Conclude(ino, ended->info, CommitTiming{started, absl::Now(), ThreadCpuTime() - started_cpu},
             /*seen_only=*/!ended->applied);
    return;
  }
  absl::StatusOr<CheckpointInfo> outcome = ended.ok()
                                               ? absl::StatusOr<CheckpointInfo>(ended->info)
                                               : absl::StatusOr<CheckpointInfo>(ended.status());
  const int err = outcome.ok() ? 0 : ErrnoFromStatus(outcome.status());
  if (err == ENOENT || err == EINVAL || err == ENOTDIR) {  // removed meanwhile
    Forget(ino, outcome.status());
    return;
  }
  const std::string why = outcome.ok() ? "still pending" : std::string(outcome.status().message());
  bool give_up = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = barriers_.find(ino);
    if (it != barriers_.end()) {
      give_up = ++it->second->failed_commits >= options_.max_commit_attempts;
      if (!give_up) {
        it->second->ending = false;
        it->second->retry_at = absl::Now() + options_.retry_delay;
      }
    }
  }
  if (!give_up) {
    CKPTFS_LOG(kWarning) << "commit of checkpoint " << ino << " failed, retrying in "
                         << absl::FormatDuration(options_.retry_delay) << ": " << why;
    return;
  }
  // Every rank waits for this outcome: a commit that cannot succeed must
  // end the barrier rather than leave them waiting forever.
  AbortNow(ino, EIO,
           absl::StrCat("the commit failed ", options_.max_commit_attempts, " times: ", why));
}

void CheckpointCoordinator::AbortNow(uint64_t ino, int err, const std::string& reason) {
  absl::StatusOr<CheckpointStore::Ended> info = store_->AbortIfPending(ino, err, reason);
  if (info.ok()) {
    if (info->applied) Metrics().aborted.Increment();
    Conclude(ino, info->info, std::nullopt, /*seen_only=*/!info->applied);
    return;
  }
  const int store_err = ErrnoFromStatus(info.status());
  if (store_err == ENOENT || store_err == EINVAL || store_err == ENOTDIR) {
    Forget(ino, info.status());
    return;
  }
  CKPTFS_LOG(kWarning) << "abort of checkpoint " << ino << " failed, retrying in "
                       << absl::FormatDuration(options_.retry_delay) << ": "
                       << info.status().message();
  absl::MutexLock lock(&mu_);
  auto it = barriers_.find(ino);
  if (it != barriers_.end()) {
    it->second->ending = false;
    it->second->retry_at = absl::Now() + options_.retry_delay;
  }
}

void CheckpointCoordinator::Conclude(uint64_t ino, const CheckpointInfo& info,
                                     std::optional<CommitTiming> timing, bool seen_only) {
  std::unique_ptr<Barrier> barrier;
  {
    absl::MutexLock lock(&mu_);
    auto it = barriers_.find(ino);
    if (it != barriers_.end()) {
      barrier = std::move(it->second);
      barriers_.erase(it);
    }
  }
  if (barrier != nullptr) {
    const absl::StatusOr<CheckpointInfo> outcome = Outcome(info);
    const absl::Time answering = absl::Now();
    std::vector<Barrier::Waiter> waiters = barrier->TakeAll();
    const absl::Duration answering_cpu = Answer(waiters, outcome);
    const absl::Time answered = absl::Now();
    if (seen_only) {
      if (info.state() == COMMITTED) {
        CKPTFS_LOG(kInfo) << "checkpoint " << info.name() << " (" << ino
                          << ") was committed by another server; " << waiters.size()
                          << " waiting commits answered here";
      }
    } else if (info.state() == COMMITTED && barrier->completed_at().has_value()) {
      // The barrier's own latency, without the network: from the last
      // arrival counted to the last waiting commit answered; and its parts.
      const absl::Time last_arrival = *barrier->completed_at();
      Metrics().commit_latency.ObserveDuration(answered - last_arrival);
      auto ms = [](absl::Duration d) {
        return absl::StrFormat("%.1f", absl::ToDoubleMilliseconds(d));
      };
      std::string parts;
      if (timing.has_value()) {
        parts = absl::StrCat(" (the commit started after ", ms(timing->started - last_arrival),
                             " ms and ran ", ms(timing->finished - timing->started), " ms, CPU ",
                             ms(timing->cpu), " ms; ");
      } else {
        parts = " (";
      }
      absl::StrAppend(&parts, "answering took ", ms(answered - answering), " ms, CPU ",
                      ms(answering_cpu), " ms)");
      CKPTFS_LOG(kInfo) << "checkpoint " << info.name() << " (" << ino
                        << ") committed: " << info.ranks() << " ranks, " << waiters.size()
                        << " waiting commits answered " << ms(answered - last_arrival)
                        << " ms after the last arrival" << parts;
    }
  }
  // Also when another server ended it (seen_only): that server may have
  // died before dropping them, and dropping twice costs one empty scan.
  if (absl::Status dropped = store_->DropArrivals(ino); !dropped.ok()) {
    CKPTFS_LOG(kWarning) << "cannot drop the arrival records of checkpoint " << ino << ": "
                         << dropped.message();
  }
  if (seen_only) return;  // the server that ended it does the rest
  if (info.state() == ABORTED) OnOrphans();
  if (info.state() != COMMITTED) return;
  absl::StatusOr<std::vector<uint64_t>> removed = store_->Retain(ino);
  if (!removed.ok()) {
    CKPTFS_LOG(kWarning) << "retention after checkpoint " << info.name()
                         << " committed failed: " << removed.status().message();
    return;
  }
  for (uint64_t gone : *removed) {
    Forget(gone,
           ErrnoStatus(ENOENT, absl::StrCat("checkpoint ", gone, " was removed by retention")));
    (void)store_->DropArrivals(gone);
  }
  if (!removed->empty()) OnOrphans();
}

void CheckpointCoordinator::Forget(uint64_t ino, const absl::Status& status) {
  std::unique_ptr<Barrier> barrier;
  {
    absl::MutexLock lock(&mu_);
    auto it = barriers_.find(ino);
    if (it == barriers_.end()) return;
    barrier = std::move(it->second);
    barriers_.erase(it);
  }
  std::vector<Barrier::Waiter> waiters = barrier->TakeAll();
  Answer(waiters, status);
}

absl::Duration CheckpointCoordinator::Answer(std::vector<Barrier::Waiter>& waiters,
                                             const absl::StatusOr<CheckpointInfo>& result) {
  return answer_pool_.ForEach(waiters.size(), [&](size_t i) { waiters[i].done(result); });
}

absl::Status CheckpointCoordinator::Remove(uint64_t run_dir, absl::string_view name,
                                           const CheckpointStore::RemoveOnly* only) {
  absl::StatusOr<uint64_t> ino = store_->Remove(run_dir, name, only);
  if (!ino.ok()) return ino.status();
  CKPTFS_LOG(kInfo) << "removed checkpoint " << name << " (inode " << *ino << ") of directory "
                    << run_dir;
  Forget(*ino, ErrnoStatus(ENOENT, absl::StrCat("checkpoint ", name, " was removed")));
  if (absl::Status dropped = store_->DropArrivals(*ino); !dropped.ok()) {
    CKPTFS_LOG(kWarning) << "cannot drop the arrival records of checkpoint " << *ino << ": "
                         << dropped.message();
  }
  OnOrphans();
  return absl::OkStatus();
}

absl::Status CheckpointCoordinator::WriteFailed(uint64_t ino) {
  absl::StatusOr<std::optional<uint64_t>> ckpt = store_->PendingCheckpointOf(ino);
  if (!ckpt.ok()) return ckpt.status();
  if (!ckpt->has_value()) return absl::OkStatus();
  std::string name = absl::StrCat(**ckpt);
  if (absl::StatusOr<CheckpointInfo> info = store_->Get(**ckpt); info.ok()) name = info->name();
  const std::string reason =
      absl::StrCat("a write to inode ", ino, " of checkpoint ", name, " failed");
  CKPTFS_LOG(kWarning) << "checkpoint " << name << " aborts: " << reason;
  AbortNow(**ckpt, EIO, reason);
  return absl::OkStatus();
}

void CheckpointCoordinator::OnOrphans() {
  if (on_orphans_) on_orphans_();
}

}  // namespace ckptfs::meta
