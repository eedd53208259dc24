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

namespace {

// How long a Txn's marker outlives it: far longer than any call's retries.
constexpr absl::Duration kMarkerTtl = absl::Minutes(5);

// The marker prefix of a store: beside the key prefix, never inside it (so
// no Scan of ckptfs keys meets a marker), unique to this store object.
std::string MarkerPrefix(const std::string& key_prefix) {
  absl::BitGen gen;
  return absl::StrCat(absl::StripSuffix(key_prefix, "/"), ".txn/",
                      absl::Hex(absl::Uniform<uint64_t>(gen), absl::kZeroPad16), "/");
}

}  // namespace

EtcdKvStore::EtcdKvStore(std::shared_ptr<EtcdClient> client, Options options)
    : client_(std::move(client)),
      options_(std::move(options)),
      marker_prefix_(MarkerPrefix(options_.key_prefix)) {}

EtcdKvStore::~EtcdKvStore() = default;

absl::StatusOr<std::unique_ptr<EtcdKvStore>> EtcdKvStore::Open(std::shared_ptr<EtcdClient> client,
                                                               Options options) {
  if (options.key_prefix.empty()) {
    return absl::InvalidArgumentError("the etcd key prefix must not be empty (e.g. /ckptfs/)");
  }
  if (client->options().call_timeout > kMarkerTtl / 4) {
    return absl::InvalidArgumentError(absl::StrCat("the etcd call timeout must be at most ",
                                                   absl::FormatDuration(kMarkerTtl / 4)));
  }
  std::unique_ptr<EtcdKvStore> store(new EtcdKvStore(std::move(client), std::move(options)));
  const std::string& prefix = store->options_.key_prefix;
  absl::StatusOr<etcdserverpb::RangeResponse> probe =
      store->client_->Range(prefix, EtcdPrefixEnd(prefix), 1);
  if (!probe.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "no etcd member answers (", absl::StrJoin(store->client_->options().endpoints, ", "),
        "): ", probe.status().message()));
  }
  return store;
}

absl::StatusOr<std::optional<VersionedValue>> EtcdKvStore::Get(absl::string_view key) {
  absl::StatusOr<etcdserverpb::RangeResponse> response =
      client_->Range(absl::StrCat(options_.key_prefix, key), "", 0);
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
      client_->Range(from, EtcdPrefixEnd(full_prefix), static_cast<int64_t>(limit));
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

absl::StatusOr<uint64_t> EtcdKvStore::CountPrefix(absl::string_view prefix) {
  const std::string full_prefix = absl::StrCat(options_.key_prefix, prefix);
  etcdserverpb::RangeRequest request;
  request.set_key(full_prefix);
  request.set_range_end(EtcdPrefixEnd(full_prefix));
  request.set_count_only(true);
  etcdserverpb::RangeResponse response;
  absl::Status status =
      client_->Call("Range", [&](EtcdClient::Member& member, grpc::ClientContext& context) {
        response.Clear();
        return member.kv->Range(&context, request, &response);
      });
  if (!status.ok()) return status;
  return static_cast<uint64_t>(std::max<int64_t>(0, response.count()));
}

absl::StatusOr<int64_t> EtcdKvStore::MarkerLease() {
  absl::MutexLock lock(&lease_mu_);
  if (lease_id_ != 0 && absl::Now() - lease_granted_ < kMarkerTtl / 2) return lease_id_;
  absl::StatusOr<int64_t> lease = client_->GrantLease(kMarkerTtl);
  if (!lease.ok()) return lease.status();
  lease_id_ = *lease;
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
  const bool writes = !txn.writes().empty();
  if (writes) {
    // The marker: created by this Txn and required absent by it, so a Txn
    // sent again after a lost reply can never apply twice, and its failure
    // branch tells "applied by an earlier attempt" from a real conflict.
    absl::StatusOr<int64_t> lease = MarkerLease();
    if (!lease.ok()) return lease.status();
    const std::string marker =
        absl::StrCat(marker_prefix_, next_marker_.fetch_add(1, std::memory_order_relaxed));
    etcdserverpb::Compare* absent = request.add_compare();
    absent->set_result(etcdserverpb::Compare::EQUAL);
    absent->set_target(etcdserverpb::Compare::CREATE);
    absent->set_key(marker);
    absent->set_create_revision(0);
    etcdserverpb::PutRequest* put = request.add_success()->mutable_request_put();
    put->set_key(marker);
    put->set_lease(*lease);
    request.add_failure()->mutable_request_range()->set_key(marker);
    if (fence_lease_ != 0) {
      // Only while this server still holds its server lock.
      etcdserverpb::Compare* held = request.add_compare();
      held->set_result(etcdserverpb::Compare::EQUAL);
      held->set_target(etcdserverpb::Compare::LEASE);
      held->set_key(fence_key_);
      held->set_lease(fence_lease_);
      request.add_failure()->mutable_request_range()->set_key(fence_key_);
    }
  }
  etcdserverpb::TxnResponse response;
  // Sending again after a connection failure is safe (see the marker).
  absl::Status status =
      client_->Call("Txn", [&](EtcdClient::Member& member, grpc::ClientContext& context) {
        response.Clear();
        return member.kv->Txn(&context, request, &response);
      });
  if (!status.ok()) return status;
  if (response.succeeded()) return response.header().revision();
  if (writes) {
    auto range_of = [&](int i) -> const etcdserverpb::RangeResponse* {
      if (response.responses_size() <= i || !response.responses(i).has_response_range()) {
        return nullptr;
      }
      return &response.responses(i).response_range();
    };
    const etcdserverpb::RangeResponse* marker = range_of(0);
    if (marker != nullptr && marker->kvs_size() == 1) {
      return marker->kvs(0).mod_revision();  // an earlier attempt applied it
    }
    if (fence_lease_ != 0) {
      const etcdserverpb::RangeResponse* lock = range_of(1);
      if (lock == nullptr || lock->kvs_size() == 0 || lock->kvs(0).lease() != fence_lease_) {
        if (fence_lost_) fence_lost_();
        return ErrnoStatus(EIO, absl::StrCat("this metadata server no longer holds ", fence_key_,
                                             " in etcd; another one serves the namespace"));
      }
    }
  }
  // etcd does not say which compare failed.
  return TxnConflictError(absl::StrCat("<one of ", compares.size(), " compared keys>"));
}

void EtcdKvStore::SetFence(std::string key, int64_t lease, std::function<void()> on_lost) {
  fence_key_ = std::move(key);
  fence_lease_ = lease;
  fence_lost_ = std::move(on_lost);
}

}  // namespace ckptfs::meta
