// ResendFence: keeps a storage server from applying a WRITE or TRIM after
// the client resent it.
//
// A client whose connection fails (reset, closed) cannot tell whether the
// server already took the request off that connection: the server may still
// hold it in its disk queue. The client resends it on a new connection,
// naming the earlier attempts (RequestHeader.supersedes), and goes on to
// newer writes of the same chunk once the resend is acknowledged. Were the
// late original applied after those, it would undo them. So every WRITE
// and TRIM that carries a client_id runs inside Admit's scope:
//   - a request whose (client_id, write_id) an earlier resend superseded is
//     refused with ESTALE, changing nothing;
//   - a resend records the attempts it supersedes, before it is applied.
// Both happen under one lock per target (a chunk for a WRITE, the inode for
// a TRIM) held until the request is applied, so an original that was
// admitted first is applied before the resend, never after it.
//
// Superseded ids are kept for `keep` (one hour by default): longer than any
// request waits in a server's queue (connections stall out after a minute).
// At most `max_entries` are kept; past that the oldest go first. Resends
// only follow transport failures, so the set stays small.
//
// Thread-safety: thread-safe.
#ifndef CKPTFS_SERVER_STORAGE_RESEND_FENCE_H_
#define CKPTFS_SERVER_STORAGE_RESEND_FENCE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/data.pb.h"

namespace ckptfs::storage {

class ResendFence {
 public:
  struct Options {
    absl::Duration keep = absl::Hours(1);
    size_t max_entries = 1 << 20;
  };
  ResendFence() : ResendFence(Options()) {}
  explicit ResendFence(Options options) : options_(options) {}
  ResendFence(const ResendFence&) = delete;
  ResendFence& operator=(const ResendFence&) = delete;

  // Held while the request it admitted is applied; releases the target's
  // lock. Empty (locks nothing) for requests the fence does not order.
  class Scope {
   public:
    Scope() = default;
    Scope(Scope&& other) noexcept : mu_(std::exchange(other.mu_, nullptr)) {}
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (mu_ != nullptr) mu_->Unlock();
    }

   private:
    friend class ResendFence;
    explicit Scope(absl::Mutex* mu) : mu_(mu) {}
    absl::Mutex* mu_ = nullptr;
  };

  // For a WRITE or TRIM with a client_id: locks its target, then ESTALE if
  // a resend superseded it (the lock released again), else records what it
  // supersedes and returns the scope to apply it in. Other requests: an
  // empty scope.
  absl::StatusOr<Scope> Admit(const data::RequestHeader& request) ABSL_LOCKS_EXCLUDED(mu_);

  // Superseded ids kept now (tests, metrics).
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  static constexpr size_t kStripes = 256;
  struct Key {
    uint64_t client_id;
    uint64_t write_id;
    bool operator==(const Key& o) const {
      return client_id == o.client_id && write_id == o.write_id;
    }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.client_id, k.write_id);
    }
  };

  absl::Mutex& StripeFor(const data::RequestHeader& request);
  // ESTALE if a resend superseded `request`; else records the attempts it
  // supersedes. Called with the request's stripe held.
  absl::Status Record(const data::RequestHeader& request) ABSL_LOCKS_EXCLUDED(mu_);
  void ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  std::array<absl::Mutex, kStripes> stripes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, absl::Time> superseded_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, Key>> by_age_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_RESEND_FENCE_H_
