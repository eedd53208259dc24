// absl::Status <-> grpc::Status at the metadata RPC boundary.
//
// The errno attached to an absl::Status (common/errno_status.h) crosses the
// wire in grpc::Status::error_details as a decimal string, so a client gets
// back exactly the errno the service chose. Thread-safe (pure functions).
#ifndef CKPTFS_COMMON_GRPC_STATUS_H_
#define CKPTFS_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ckptfs {

grpc::Status ToGrpcStatus(const absl::Status& status);

// `rpc` names the call for the message, e.g. "Lookup".
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view rpc);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_GRPC_STATUS_H_
