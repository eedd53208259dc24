// See resend_stamp.h.
#include "client/resend_stamp.h"

#include <sys/random.h>
#include <unistd.h>

#include "absl/time/clock.h"

namespace ckptfs::client {
namespace {

uint64_t RandomClientId() {
  uint64_t value = 0;
  if (::getrandom(&value, sizeof(value), 0) != static_cast<ssize_t>(sizeof(value))) {
    value = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) * 0x9E3779B97F4A7C15ull ^
            static_cast<uint64_t>(::getpid());
  }
  return value != 0 ? value : 1;
}

}  // namespace

ResendStamp::ResendStamp() : client_id_(RandomClientId()) {}

void ResendStamp::Stamp(data::RequestHeader& request) {
  if (request.op() != data::WRITE && request.op() != data::TRIM) return;
  if (request.write_id() != 0) request.add_supersedes(request.write_id());
  request.set_client_id(client_id_);
  request.set_write_id(next_write_id_.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace ckptfs::client
