// See rank_io.h.
#include "bench/rank_io.h"

#include <cerrno>

#include "common/errno_status.h"

namespace ckptfs::bench {

bool IsGone(const absl::Status& status) {
  const int err = ErrnoFromStatus(status);
  return !status.ok() && (err == ENOENT || err == ESTALE);
}

}  // namespace ckptfs::bench
