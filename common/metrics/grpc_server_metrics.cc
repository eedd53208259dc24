// See grpc_server_metrics.h.
#include "common/metrics/grpc_server_metrics.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace ckptfs::metrics {

namespace {

const char* CodeName(int code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
}

// One per call, owned by gRPC; destroyed when the call is.
class RpcInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcInterceptor(const RpcMetricsFactory* factory, const RpcMetricsFactory::MethodMetrics* method)
      : factory_(factory), method_(method), start_(absl::Now()) {
    factory_->in_flight().Add(1);
  }
  ~RpcInterceptor() override { factory_->in_flight().Sub(1); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      method_->calls->Increment();
      method_->latency->ObserveDuration(absl::Now() - start_);
      if (!status.ok()) factory_->ErrorsFor(status.error_code()).Increment();
    }
    methods->Proceed();
  }

 private:
  const RpcMetricsFactory* const factory_;
  const RpcMetricsFactory::MethodMetrics* const method_;
  const absl::Time start_;
};

}  // namespace

RpcMetricsFactory::RpcMetricsFactory(
    Registry* registry, const std::string& prefix,
    const std::vector<const google::protobuf::ServiceDescriptor*>& services) {
  Family<Counter>& calls = registry->Counter(absl::StrCat(prefix, "_rpcs_total"),
                                             "RPCs answered, by method.", {"method"});
  Family<Histogram>& latency = registry->Histogram(
      absl::StrCat(prefix, "_rpc_duration_seconds"),
      "Time from an RPC's start to its status, by method (a long poll counts its wait).",
      {"method"}, LatencyBuckets());
  Family<Counter>& errors =
      registry->Counter(absl::StrCat(prefix, "_rpc_errors_total"),
                        "RPCs answered with a non-OK status, by gRPC status code.", {"code"});
  in_flight_ = &registry
                    ->Gauge(absl::StrCat(prefix, "_rpcs_in_flight"),
                            "RPCs started and not yet finished.", {})
                    .WithLabels({});
  for (const google::protobuf::ServiceDescriptor* service : services) {
    if (service == nullptr) continue;  // not linked in: its calls count as "unknown"
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string& name = service->method(i)->name();
      methods_[absl::StrCat("/", service->full_name(), "/", name)] =
          MethodMetrics{&calls.WithLabels({name}), &latency.WithLabels({name})};
    }
  }
  unknown_ = MethodMetrics{&calls.WithLabels({"unknown"}), &latency.WithLabels({"unknown"})};
  for (int code = 1; code <= 16; ++code) errors_[code] = &errors.WithLabels({CodeName(code)});
}

const RpcMetricsFactory::MethodMetrics& RpcMetricsFactory::ForMethod(const char* full_name) const {
  if (full_name == nullptr) return unknown_;
  auto it = methods_.find(absl::string_view(full_name));
  return it == methods_.end() ? unknown_ : it->second;
}

Counter& RpcMetricsFactory::ErrorsFor(grpc::StatusCode code) const {
  const int index = static_cast<int>(code);
  return *errors_[index >= 1 && index <= 16 ? index : 2];  // else UNKNOWN
}

grpc::experimental::Interceptor* RpcMetricsFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new RpcInterceptor(this, &ForMethod(info->method()));
}

void RpcMetricsFactory::Install(
    grpc::ServerBuilder& builder, Registry* registry, const std::string& prefix,
    const std::vector<const google::protobuf::ServiceDescriptor*>& services) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<RpcMetricsFactory>(registry, prefix, services));
  builder.experimental().SetInterceptorCreators(std::move(creators));
}

}  // namespace ckptfs::metrics
