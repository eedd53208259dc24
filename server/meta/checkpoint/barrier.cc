// See barrier.h.
#include "server/meta/checkpoint/barrier.h"

#include <utility>

namespace ckptfs::meta {

Barrier::Barrier(CheckpointInfo info, const std::vector<uint32_t>& arrived)
    : info_(std::move(info)), arrived_(info_.ranks(), false) {
  for (uint32_t rank : arrived) {
    if (rank < info_.ranks()) Arrive(rank);
  }
}

bool Barrier::Arrive(uint32_t rank) {
  if (rank >= arrived_.size() || arrived_[rank]) return false;
  arrived_[rank] = true;
  ++count_;
  if (complete()) completed_at_ = absl::Now();
  return true;
}

std::vector<uint32_t> Barrier::Missing(size_t limit) const {
  std::vector<uint32_t> missing;
  for (uint32_t rank = 0; rank < arrived_.size() && missing.size() < limit; ++rank) {
    if (!arrived_[rank]) missing.push_back(rank);
  }
  return missing;
}

CheckpointInfo Barrier::Snapshot() const {
  CheckpointInfo info = info_;
  info.set_arrived(count_);
  return info;
}

std::optional<int64_t> Barrier::deadline_ms() const {
  if (info_.first_commit_ms() == 0) return std::nullopt;
  return info_.first_commit_ms() + int64_t{info_.timeout_s()} * 1000;
}

void Barrier::AddWaiter(absl::Time poll_deadline, Waiter waiter) {
  waiters_.emplace(poll_deadline, std::move(waiter));
}

std::vector<Barrier::Waiter> Barrier::TakeExpired(absl::Time now) {
  std::vector<Waiter> expired;
  auto end = waiters_.upper_bound(now);
  for (auto it = waiters_.begin(); it != end; ++it) expired.push_back(std::move(it->second));
  waiters_.erase(waiters_.begin(), end);
  return expired;
}

std::vector<Barrier::Waiter> Barrier::TakeAll() {
  std::vector<Waiter> all;
  all.reserve(waiters_.size());
  for (auto& [deadline, waiter] : waiters_) all.push_back(std::move(waiter));
  waiters_.clear();
  return all;
}

std::optional<absl::Time> Barrier::next_poll_deadline() const {
  if (waiters_.empty()) return std::nullopt;
  return waiters_.begin()->first;
}

}  // namespace ckptfs::meta
