// See random_id.h.
#include "common/random_id.h"

#include <sys/random.h>
#include <unistd.h>

#include "absl/time/clock.h"

namespace ckptfs {

uint64_t RandomNonzeroId() {
  uint64_t value = 0;
  if (::getrandom(&value, sizeof(value), 0) != static_cast<ssize_t>(sizeof(value))) {
    value = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) * 0x9E3779B97F4A7C15ull ^
            static_cast<uint64_t>(::getpid());
  }
  return value != 0 ? value : 1;
}

}  // namespace ckptfs
