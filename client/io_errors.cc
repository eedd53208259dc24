// See io_errors.h.
#include "client/io_errors.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
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

}  // namespace

absl::Status FileIoError(const absl::Status& status, absl::string_view context) {
  int err = ErrnoFromStatus(status);
  if (err == 0 || IsTransportErrno(err)) err = EIO;
  return ErrnoStatusWithCode(status.code() == absl::StatusCode::kOk ? absl::StatusCode::kInternal
                                                                    : status.code(),
                             err, absl::StrCat(context, ": ", status.message()));
}

}  // namespace ckptfs::client
