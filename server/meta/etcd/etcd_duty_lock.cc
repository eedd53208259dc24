// See etcd_duty_lock.h.
#include "server/meta/etcd/etcd_duty_lock.h"

#include <utility>

#include "absl/time/clock.h"
#include "common/log.h"

namespace ckptfs::meta {

EtcdDutyLock::EtcdDutyLock(std::shared_ptr<EtcdClient> client, EtcdServerLock::Options options,
                           std::function<void()> start, std::function<void()> stop)
    : client_(std::move(client)),
      options_(std::move(options)),
      start_(std::move(start)),
      stop_(std::move(stop)) {
  options_.duties_only = true;
  options_.wait = absl::InfiniteDuration();
  options_.cancelled = [this] {
    absl::MutexLock lock(&mu_);
    return stopping_;
  };
  thread_ = std::thread([this] { Loop(); });
}

EtcdDutyLock::~EtcdDutyLock() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool EtcdDutyLock::held() {
  absl::MutexLock lock(&mu_);
  return held_;
}

void EtcdDutyLock::Loop() {
  const std::string key = EtcdServerLock::LockKey(options_.key_prefix);
  while (true) {
    absl::StatusOr<std::unique_ptr<EtcdServerLock>> lock =
        EtcdServerLock::Acquire(client_, options_, [this] {
          absl::MutexLock guard(&mu_);
          lost_ = true;
        });
    if (!lock.ok()) {
      if (absl::IsCancelled(lock.status())) return;
      CKPTFS_LOG(kWarning) << "cannot take " << key << ": " << lock.status().message();
      absl::SleepFor(absl::Seconds(1));
      continue;
    }
    start_();
    CKPTFS_LOG(kInfo) << "took the cluster duties (orphan reclaimer): holds " << key;
    bool stopping = false;
    {
      absl::MutexLock hold(&mu_);
      held_ = true;
      auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || lost_; };
      mu_.Await(absl::Condition(&done));
      held_ = false;
      lost_ = false;
      stopping = stopping_;
    }
    stop_();
    lock->reset();  // revokes the lease: another server takes the duties now
    if (stopping) return;
    CKPTFS_LOG(kWarning) << "stopped the cluster duties (lost " << key
                         << "); serving on, and taking them again when free";
  }
}

}  // namespace ckptfs::meta
