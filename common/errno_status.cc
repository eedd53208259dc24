// See errno_status.h.
#include "common/errno_status.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ckptfs {
namespace {
constexpr char kErrnoPayloadUrl[] = "ckptfs/errno";
}  // namespace

absl::StatusCode CodeForErrno(int err) {
  switch (err) {
    case 0:
      return absl::StatusCode::kOk;
    case ENOENT:
      return absl::StatusCode::kNotFound;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case EACCES:
    case EPERM:
      return absl::StatusCode::kPermissionDenied;
    case EINVAL:
    case ENAMETOOLONG:
    case ERANGE:
      return absl::StatusCode::kInvalidArgument;
    case ENOTEMPTY:
    case ENOTDIR:
    case EISDIR:
    case EROFS:
    case EBUSY:
    case ENODATA:
    case ESTALE:
      return absl::StatusCode::kFailedPrecondition;
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
      return absl::StatusCode::kResourceExhausted;
    case ETIMEDOUT:
      return absl::StatusCode::kDeadlineExceeded;
    case EINTR:
    case ECANCELED:
      return absl::StatusCode::kCancelled;
    case ENOSYS:
    case EOPNOTSUPP:
      return absl::StatusCode::kUnimplemented;
    case EFBIG:
    case EOVERFLOW:
      return absl::StatusCode::kOutOfRange;
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case EAGAIN:
      return absl::StatusCode::kUnavailable;
    case EBADMSG:
    case EILSEQ:
      return absl::StatusCode::kDataLoss;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status ErrnoStatus(int err, absl::string_view context) {
  return ErrnoStatusWithCode(CodeForErrno(err), err, context);
}

absl::Status ErrnoStatusWithCode(absl::StatusCode code, int err, absl::string_view context) {
  absl::Status status(code, context);
  status.SetPayload(kErrnoPayloadUrl, absl::Cord(absl::StrCat(err)));
  return status;
}

absl::Status SyscallError(int err, absl::string_view context) {
  return ErrnoStatus(err, absl::StrCat(context, ": ", std::strerror(err)));
}

int ErrnoFromStatus(const absl::Status& status) {
  if (status.ok()) return 0;
  if (auto payload = status.GetPayload(kErrnoPayloadUrl)) {
    int err = 0;
    if (absl::SimpleAtoi(std::string(*payload), &err) && err > 0) return err;
  }
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return ENOENT;
    case absl::StatusCode::kAlreadyExists:
      return EEXIST;
    case absl::StatusCode::kPermissionDenied:
      return EACCES;
    case absl::StatusCode::kUnauthenticated:
      return EACCES;
    case absl::StatusCode::kInvalidArgument:
      return EINVAL;
    case absl::StatusCode::kResourceExhausted:
      return ENOSPC;
    case absl::StatusCode::kDeadlineExceeded:
      return ETIMEDOUT;
    case absl::StatusCode::kCancelled:
      return EINTR;
    case absl::StatusCode::kUnimplemented:
      return ENOSYS;
    case absl::StatusCode::kOutOfRange:
      return EFBIG;
    case absl::StatusCode::kFailedPrecondition:
      return EPERM;
    default:
      return EIO;
  }
}

}  // namespace ckptfs
