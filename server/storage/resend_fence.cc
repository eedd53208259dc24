// See resend_fence.h.
#include "server/storage/resend_fence.h"

#include <cerrno>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace ckptfs::storage {

absl::Mutex& ResendFence::StripeFor(const data::RequestHeader& request) {
  // A TRIM reaches every chunk of the inode: one stripe per inode for it
  // and for the inode's WRITEs would serialize them all, so a TRIM takes
  // the inode's stripe and a WRITE its chunk's. A late TRIM original and a
  // resent TRIM still meet on one stripe, as do two attempts of a WRITE.
  const size_t hash = request.op() == data::TRIM
                          ? absl::HashOf(request.ino(), uint64_t{1} << 40)
                          : absl::HashOf(request.ino(), uint64_t{request.chunk_index()});
  return stripes_[hash % kStripes];
}

// The stripe's lock is handed to the returned Scope, which releases it;
// clang's lock analysis follows no lock across a return, so it is off here
// (Record, which holds mu_, is analysed).
absl::StatusOr<ResendFence::Scope> ResendFence::Admit(const data::RequestHeader& request)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (request.client_id() == 0 || (request.op() != data::WRITE && request.op() != data::TRIM)) {
    return Scope();
  }
  absl::Mutex& stripe = StripeFor(request);
  stripe.Lock();
  if (absl::Status recorded = Record(request); !recorded.ok()) {
    stripe.Unlock();
    return recorded;
  }
  return Scope(&stripe);
}

absl::Status ResendFence::Record(const data::RequestHeader& request) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  ExpireLocked(now);
  if (superseded_.contains(Key{request.client_id(), request.write_id()})) {
    return ErrnoStatus(ESTALE, absl::StrCat("attempt ", request.write_id(), " of client 0x",
                                            absl::Hex(request.client_id()),
                                            " was sent again and the resend applied: this "
                                            "late copy is dropped, nothing changed"));
  }
  for (uint64_t earlier : request.supersedes()) {
    const Key key{request.client_id(), earlier};
    if (!superseded_.emplace(key, now).second) continue;
    by_age_.emplace_back(now, key);
    while (by_age_.size() > options_.max_entries) {
      superseded_.erase(by_age_.front().second);
      by_age_.pop_front();
    }
  }
  return absl::OkStatus();
}

void ResendFence::ExpireLocked(absl::Time now) {
  while (!by_age_.empty() && now - by_age_.front().first > options_.keep) {
    superseded_.erase(by_age_.front().second);
    by_age_.pop_front();
  }
}

size_t ResendFence::size() const {
  absl::MutexLock lock(&mu_);
  return superseded_.size();
}

}  // namespace ckptfs::storage
