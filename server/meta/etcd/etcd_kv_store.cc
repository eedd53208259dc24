// EtcdKvStore (etcd_kv_store.h): KvStore over etcd v3's KV gRPC API.
#include "server/meta/etcd/etcd_kv_store.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::meta {

struct EtcdKvStore::Member {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
};

namespace {

// The smallest key greater than every key starting with `prefix` (etcd's
// range_end for a prefix); "\0" (to the end) if there is none.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// How long a Txn's marker outlives it: far longer than any call's retries.
constexpr absl::Duration kMarkerTtl = absl::Minutes(5);

bool IsConnectionFailure(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

absl::Status EtcdError(absl::string_view what, const std::string& address,
                       const grpc::Status& status) {
  std::string message = absl::StrCat("etcd ", what, " at ", address, ": ", status.error_message());
  if (absl::StrContains(status.error_message(), "too many operations")) {
    absl::StrAppend(&message, " (raise etcd's --max-txn-ops)");
  } else if (absl::StrContains(status.error_message(), "request is too large")) {
    absl::StrAppend(&message, " (raise etcd's --max-request-bytes)");
  }
  return ErrnoStatus(EIO, message);
}

// The marker prefix of a store: beside the key prefix, never inside it (so
// no Scan of ckptfs keys meets a marker), unique to this store object.
std::string MarkerPrefix(const std::string& key_prefix) {
  absl::BitGen gen;
  return absl::StrCat(absl::StripSuffix(key_prefix, "/"), ".txn/",
                      absl::Hex(absl::Uniform<uint64_t>(gen), absl::kZeroPad16), "/");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> EtcdKvStore::ParseEndpoints(absl::string_view list) {
  std::vector<std::string> endpoints;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    absl::ConsumePrefix(&item, "http://");
    const size_t colon = item.rfind(':');
    uint32_t port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(item.substr(colon + 1), &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint \"", item, "\" is not host:port (e.g. 127.0.0.1:2379)"));
    }
    endpoints.emplace_back(item);
  }
  if (endpoints.empty()) {
    return absl::InvalidArgumentError("no etcd endpoints given (host:port,host:port,...)");
  }
  return endpoints;
}

EtcdKvStore::EtcdKvStore(Options options)
    : options_(std::move(options)), marker_prefix_(MarkerPrefix(options_.key_prefix)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Reconnect to a restarted member quickly rather than after gRPC's default
  // backoff of up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  for (const std::string& address : options_.endpoints) {
    auto member = std::make_unique<Member>();
    member->address = address;
    member->channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    member->kv = etcdserverpb::KV::NewStub(member->channel);
    member->lease = etcdserverpb::Lease::NewStub(member->channel);
    members_.push_back(std::move(member));
  }
}

EtcdKvStore::~EtcdKvStore() = default;

absl::StatusOr<std::unique_ptr<EtcdKvStore>> EtcdKvStore::Open(Options options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("no etcd endpoints given");
  if (options.key_prefix.empty()) {
    return absl::InvalidArgumentError("the etcd key prefix must not be empty (e.g. /ckptfs/)");
  }
  if (options.call_timeout > kMarkerTtl / 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the etcd call timeout must be at most ", absl::FormatDuration(kMarkerTtl / 4)));
  }
  std::unique_ptr<EtcdKvStore> store(new EtcdKvStore(std::move(options)));
  absl::StatusOr<etcdserverpb::RangeResponse> probe =
      store->Range(store->options_.key_prefix, PrefixEnd(store->options_.key_prefix), 1);
  if (!probe.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "no etcd member answers (", absl::StrJoin(store->options_.endpoints, ", "),
        "): ", probe.status().message()));
  }
  return store;
}

absl::Status EtcdKvStore::Call(
    absl::string_view what,
    const std::function<grpc::Status(Member&, grpc::ClientContext&)>& attempt,
    const std::function<absl::StatusOr<bool>()>& applied) {
  const absl::Time deadline = absl::Now() + options_.call_timeout;
  absl::Duration backoff = absl::Milliseconds(20);
  bool unknown_outcome = false;
  for (;;) {
    if (unknown_outcome && applied) {
      absl::StatusOr<bool> done = applied();
      if (done.ok() && *done) return absl::OkStatus();
      if (!done.ok()) return done.status();  // could not even read: give up
    }
    const size_t index = current_.load(std::memory_order_relaxed) % members_.size();
    Member& member = *members_[index];
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(std::min(deadline, absl::Now() + options_.attempt_timeout)));
    const grpc::Status status = attempt(member, context);
    if (status.ok()) return absl::OkStatus();
    if (!IsConnectionFailure(status)) return EtcdError(what, member.address, status);
    // This member is down or lost its leader: try the next one.
    size_t expected = index;
    current_.compare_exchange_strong(expected, index + 1, std::memory_order_relaxed);
    unknown_outcome = true;
    if (absl::Now() + backoff >= deadline) {
      return ErrnoStatus(EIO, absl::StrCat("etcd ", what, ": no member of ",
                                           absl::StrJoin(options_.endpoints, ", "),
                                           " answered within ",
                                           absl::FormatDuration(options_.call_timeout),
                                           "; last error from ", member.address, ": ",
                                           status.error_message()));
    }
    CKPTFS_LOG(kWarning) << "etcd member " << member.address << " failed " << what << " ("
                         << status.error_message() << "); trying the next member";
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdKvStore::Range(const std::string& key,
                                                               const std::string& range_end,
                                                               int64_t limit) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  if (!range_end.empty()) request.set_range_end(range_end);
  request.set_limit(limit);
  etcdserverpb::RangeResponse response;
  absl::Status status = Call(
      "Range",
      [&](Member& member, grpc::ClientContext& context) {
        response.Clear();
        return member.kv->Range(&context, request, &response);
      },
      nullptr);
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<std::optional<VersionedValue>> EtcdKvStore::Get(absl::string_view key) {
  absl::StatusOr<etcdserverpb::RangeResponse> response =
      Range(absl::StrCat(options_.key_prefix, key), "", 0);
  if (!response.ok()) return response.status();
  if (response->kvs_size() == 0) return std::optional<VersionedValue>();
  const mvccpb::KeyValue& kv = response->kvs(0);
  return std::optional<VersionedValue>(VersionedValue{kv.value(), kv.mod_revision()});
}

absl::StatusOr<std::vector<KeyValue>> EtcdKvStore::Scan(absl::string_view prefix,
                                                        absl::string_view start_after,
                                                        size_t limit) {
  const std::string full_prefix = absl::StrCat(options_.key_prefix, prefix);
  std::string from = full_prefix;
  if (!start_after.empty()) {
    absl::StrAppend(&from, start_after);
    from.push_back('\0');  // strictly after prefix + start_after
  }
  absl::StatusOr<etcdserverpb::RangeResponse> response =
      Range(from, PrefixEnd(full_prefix), static_cast<int64_t>(limit));
  if (!response.ok()) return response.status();
  std::vector<KeyValue> entries;
  entries.reserve(response->kvs_size());
  for (mvccpb::KeyValue& kv : *response->mutable_kvs()) {
    std::string key = std::move(*kv.mutable_key());
    key.erase(0, options_.key_prefix.size());
    entries.push_back(KeyValue{std::move(key), std::move(*kv.mutable_value()), kv.mod_revision()});
  }
  return entries;
}

absl::StatusOr<int64_t> EtcdKvStore::MarkerLease() {
  absl::MutexLock lock(&lease_mu_);
  if (lease_id_ != 0 && absl::Now() - lease_granted_ < kMarkerTtl / 2) return lease_id_;
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(absl::ToInt64Seconds(kMarkerTtl));
  etcdserverpb::LeaseGrantResponse response;
  absl::Status status = Call(
      "LeaseGrant",
      [&](Member& member, grpc::ClientContext& context) {
        response.Clear();
        return member.lease->LeaseGrant(&context, request, &response);
      },
      nullptr);
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return ErrnoStatus(EIO, absl::StrCat("etcd LeaseGrant: ", response.error()));
  }
  lease_id_ = response.id();
  lease_granted_ = absl::Now();
  return lease_id_;
}

absl::StatusOr<int64_t> EtcdKvStore::Commit(const Txn& txn) {
  etcdserverpb::TxnRequest request;
  const std::vector<Compare> compares = txn.SortedCompares();
  request.mutable_compare()->Reserve(static_cast<int>(compares.size()));
  for (const Compare& compare : compares) {
    etcdserverpb::Compare* c = request.add_compare();
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_target(etcdserverpb::Compare::MOD);
    c->set_key(absl::StrCat(options_.key_prefix, compare.key));
    c->set_mod_revision(compare.version);  // a missing key has mod_revision 0
  }
  for (const auto& [key, value] : txn.writes()) {
    etcdserverpb::RequestOp* op = request.add_success();
    if (value.has_value()) {
      op->mutable_request_put()->set_key(absl::StrCat(options_.key_prefix, key));
      op->mutable_request_put()->set_value(*value);
    } else {
      op->mutable_request_delete_range()->set_key(absl::StrCat(options_.key_prefix, key));
    }
  }
  etcdserverpb::TxnResponse response;
  int64_t applied_revision = 0;
  std::function<absl::StatusOr<bool>()> applied;
  if (!txn.writes().empty()) {
    // The marker that tells, after a lost reply, whether this Txn landed.
    absl::StatusOr<int64_t> lease = MarkerLease();
    if (!lease.ok()) return lease.status();
    const std::string marker =
        absl::StrCat(marker_prefix_, next_marker_.fetch_add(1, std::memory_order_relaxed));
    etcdserverpb::PutRequest* put = request.add_success()->mutable_request_put();
    put->set_key(marker);
    put->set_lease(*lease);
    applied = [this, marker, &applied_revision]() -> absl::StatusOr<bool> {
      absl::StatusOr<etcdserverpb::RangeResponse> found = Range(marker, "", 0);
      if (!found.ok()) return found.status();
      if (found->kvs_size() == 0) return false;
      applied_revision = found->kvs(0).mod_revision();
      return true;
    };
  }
  absl::Status status = Call(
      "Txn",
      [&](Member& member, grpc::ClientContext& context) {
        response.Clear();
        applied_revision = 0;
        return member.kv->Txn(&context, request, &response);
      },
      applied);
  if (!status.ok()) return status;
  if (applied_revision != 0) return applied_revision;  // resolved after a lost reply
  if (!response.succeeded()) {
    // etcd does not say which compare failed.
    return TxnConflictError(absl::StrCat("<one of ", compares.size(), " compared keys>"));
  }
  return response.header().revision();
}

}  // namespace ckptfs::meta
