// See io_errors.h.
#include "client/io_errors.h"

#include <cerrno>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"

namespace ckptfs::client {
namespace {

bool IsTransportErrno(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case EPIPE:
    case ETIMEDOUT:
    case EBADMSG:
    case EAGAIN:
    case EPROTO:
      return true;
    default:
      return false;
  }
}

// What to do about a failure with errno `err` (the original one); "" when
// the errno says it already (EROFS, EINVAL ...).
absl::string_view Advice(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case EPIPE:
      return "storage server unreachable: check `ckptfs status`";
    case ETIMEDOUT:
    case EAGAIN:
      return "storage server did not answer in time: check `ckptfs status` for a down or "
             "overloaded server";
    case EBADMSG:
    case EPROTO:
      return "data garbled between client and storage server: check the network, then "
             "retry";
    case EIO:
      return "the storage server could not read or write the chunk: a failed disk, or a "
             "chunk failing its checksum; see the server's log, and `ckptfs ckpt verify "
             "DIR` for the damaged files";
    case ENOSPC:
    case EDQUOT:
      return "storage server full: free space with `ckptfs ckpt gc RUN_DIR` or `ckptfs "
             "ckpt rm`; `ckptfs status` shows each server's use";
    default:
      return "";
  }
}

}  // namespace

absl::Status FileIoError(const absl::Status& status, absl::string_view context) {
  const int original = ErrnoFromStatus(status);
  int err = original;
  if (err == 0 || IsTransportErrno(err)) err = EIO;
  std::string message = absl::StrCat(context, ": ", status.message());
  const absl::string_view advice = Advice(original == 0 ? EIO : original);
  // A status passed through twice keeps one piece of advice.
  if (!advice.empty() && message.find("`ckptfs ") == std::string::npos) {
    absl::StrAppend(&message, " (", advice, ")");
  }
  return ErrnoStatusWithCode(
      status.code() == absl::StatusCode::kOk ? absl::StatusCode::kInternal : status.code(), err,
      message);
}

absl::Status AnnotateError(const absl::Status& status, absl::string_view context) {
  const int err = ErrnoFromStatus(status);
  return ErrnoStatusWithCode(status.code(), err == 0 ? EIO : err,
                             absl::StrCat(context, ": ", status.message()));
}

bool ShouldWarnAboutServer(uint32_t server_id) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* last = new absl::flat_hash_map<uint32_t, absl::Time>();  // guarded by mu
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu);
  auto [it, first] = last->emplace(server_id, now);
  if (first) return true;
  if (now - it->second < absl::Minutes(1)) return false;
  it->second = now;
  return true;
}

}  // namespace ckptfs::client
