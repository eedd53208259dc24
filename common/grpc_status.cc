// See grpc_status.h.
#include "common/grpc_status.h"

#include <cerrno>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace ckptfs {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()),
                      absl::StrCat(ErrnoFromStatus(status)));
}

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view rpc) {
  if (status.ok()) return absl::OkStatus();
  int err = 0;
  if (absl::SimpleAtoi(status.error_details(), &err) && err > 0) {
    return ErrnoStatus(err, status.error_message());
  }
  // Not from our service: a transport failure, a deadline, a garbage reply.
  err = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? ETIMEDOUT : EIO;
  return ErrnoStatusWithCode(static_cast<absl::StatusCode>(status.error_code()), err,
                             absl::StrCat("metadata service ", rpc, ": ", status.error_message()));
}

}  // namespace ckptfs
