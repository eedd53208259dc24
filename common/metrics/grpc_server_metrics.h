// RPC metrics for a gRPC server, taken by a server interceptor:
//
//   <prefix>_rpcs_total{method}            calls answered, by method
//   <prefix>_rpc_duration_seconds{method}  from the call's start to its status
//   <prefix>_rpc_errors_total{code}        calls answered with a non-OK status,
//                                          by gRPC code name (NOT_FOUND, ...)
//   <prefix>_rpcs_in_flight                calls started and not yet finished
//
// A long poll (CheckpointService's waiting commit) counts its whole wait.
// The methods' children are created up front from the services'
// descriptors, so a call takes no lock; an unknown method counts as
// "unknown".
//
// Thread-safety: the factory is immutable after construction; gRPC calls it
// from its threads. It must outlive the server it is installed in — gRPC
// owns it once given to ServerBuilder (see Install).
#ifndef CKPTFS_COMMON_METRICS_GRPC_SERVER_METRICS_H_
#define CKPTFS_COMMON_METRICS_GRPC_SERVER_METRICS_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <array>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/metrics/metrics.h"
#include "google/protobuf/descriptor.h"

namespace ckptfs::metrics {

class RpcMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  struct MethodMetrics {
    Counter* calls = nullptr;
    Histogram* latency = nullptr;
  };

  // Metrics named `prefix`_... (e.g. "ckptfs_meta") in `registry`, with a
  // child for each method of `services`.
  RpcMetricsFactory(Registry* registry, const std::string& prefix,
                    const std::vector<const google::protobuf::ServiceDescriptor*>& services);

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

  // Makes `builder`'s server use a new factory for `services`.
  static void Install(grpc::ServerBuilder& builder, Registry* registry, const std::string& prefix,
                      const std::vector<const google::protobuf::ServiceDescriptor*>& services);

  const MethodMetrics& ForMethod(const char* full_name) const;
  Counter& ErrorsFor(grpc::StatusCode code) const;
  Gauge& in_flight() const { return *in_flight_; }

 private:
  absl::flat_hash_map<std::string, MethodMetrics> methods_;  // by "/pkg.Service/Method"
  MethodMetrics unknown_;
  std::array<Counter*, 17> errors_{};  // by code; [0] (OK) unused
  Gauge* in_flight_;
};

}  // namespace ckptfs::metrics

#endif  // CKPTFS_COMMON_METRICS_GRPC_SERVER_METRICS_H_
