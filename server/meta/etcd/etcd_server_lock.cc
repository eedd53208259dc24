// EtcdServerLock (etcd_server_lock.h): a leased key and its keep-alive.
#include "server/meta/etcd/etcd_server_lock.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace ckptfs::meta {

std::string EtcdServerLock::LockKey(const std::string& key_prefix) {
  return absl::StrCat(absl::StripSuffix(key_prefix, "/"), ".server");
}

absl::StatusOr<std::unique_ptr<EtcdServerLock>> EtcdServerLock::Acquire(
    std::shared_ptr<EtcdClient> client, Options options, std::function<void()> on_lost) {
  const std::string key = options.key.empty() ? LockKey(options.key_prefix) : options.key;
  const absl::Time give_up = options.wait == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                      : absl::Now() + options.wait;
  std::string logged_holder;
  // Between attempts: give up when told to stop or when `wait` has passed.
  auto pause = [&](const absl::Status& why) -> absl::Status {
    if (absl::Now() >= give_up) return why;
    absl::SleepFor(std::min(absl::Seconds(1), options.ttl / 3));
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError("stopped while waiting for the etcd server lock");
    }
    return absl::OkStatus();
  };
  for (;;) {
    absl::StatusOr<int64_t> lease = client->GrantLease(options.ttl);
    if (!lease.ok()) {
      // etcd unreachable or electing: a server waiting for the lock keeps
      // waiting (etcd may come up after it).
      CKPTFS_LOG(kWarning) << "cannot take " << key << ": " << lease.status().message()
                           << "; retrying";
      if (absl::Status s = pause(lease.status()); !s.ok()) return s;
      continue;
    }
    etcdserverpb::TxnRequest request;
    etcdserverpb::Compare* absent = request.add_compare();
    absent->set_result(etcdserverpb::Compare::EQUAL);
    absent->set_target(etcdserverpb::Compare::CREATE);
    absent->set_key(key);
    absent->set_create_revision(0);
    etcdserverpb::PutRequest* put = request.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(options.holder);
    put->set_lease(*lease);
    request.add_failure()->mutable_request_range()->set_key(key);
    etcdserverpb::TxnResponse response;
    bool taken_after_lost_reply = false;
    absl::Status status = client->Call(
        "Txn",
        [&](EtcdClient::Member& member, grpc::ClientContext& context) {
          response.Clear();
          return member.kv->Txn(&context, request, &response);
        },
        [&]() -> absl::StatusOr<bool> {
          absl::StatusOr<etcdserverpb::RangeResponse> now = client->Range(key, "", 0);
          if (!now.ok()) return now.status();
          taken_after_lost_reply = now->kvs_size() == 1 && now->kvs(0).lease() == *lease;
          return taken_after_lost_reply;
        });
    if (!status.ok()) {
      client->RevokeLease(*lease);
      CKPTFS_LOG(kWarning) << "cannot take " << key << ": " << status.message() << "; retrying";
      if (absl::Status s = pause(status); !s.ok()) return s;
      continue;
    }
    if (response.succeeded() || taken_after_lost_reply) {
      if (!logged_holder.empty()) {
        CKPTFS_LOG(kInfo) << "took over " << key << " from " << logged_holder;
      }
      return std::unique_ptr<EtcdServerLock>(
          new EtcdServerLock(std::move(client), std::move(options), *lease, std::move(on_lost)));
    }
    client->RevokeLease(*lease);
    std::string holder = "(unknown)";
    if (response.responses_size() == 1 && response.responses(0).has_response_range() &&
        response.responses(0).response_range().kvs_size() == 1) {
      holder = response.responses(0).response_range().kvs(0).value();
    }
    if (holder != logged_holder && absl::Now() < give_up) {
      if (options.duties_only) {
        CKPTFS_LOG(kInfo) << "metadata server " << holder << " runs the cluster duties "
                          << "(orphan reclaimer) of the etcd prefix " << options.key_prefix
                          << "; this one takes them over when it stops";
      } else {
        CKPTFS_LOG(kInfo) << "standby: metadata server " << holder << " serves the etcd prefix "
                          << options.key_prefix << "; taking over when it stops";
      }
      logged_holder = holder;
    }
    if (absl::Status s = pause(absl::DeadlineExceededError(absl::StrCat(
            "another metadata server (", holder, ") serves the etcd prefix ", options.key_prefix)));
        !s.ok()) {
      return s;
    }
  }
}

EtcdServerLock::EtcdServerLock(std::shared_ptr<EtcdClient> client, Options options, int64_t lease,
                               std::function<void()> on_lost)
    : client_(std::move(client)),
      options_(std::move(options)),
      lease_(lease),
      on_lost_(std::move(on_lost)),
      keep_alive_([this] { KeepAlive(); }) {}

EtcdServerLock::~EtcdServerLock() {
  stop_.Notify();
  keep_alive_.join();
  client_->RevokeLease(lease_);
}

EtcdServerLock::Renewal EtcdServerLock::RenewOnce() {
  EtcdClient::Member& member = client_->current_member();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.ttl / 3));
  auto stream = member.lease->LeaseKeepAlive(&context);
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease_);
  etcdserverpb::LeaseKeepAliveResponse response;
  const bool answered = stream->Write(request) && stream->Read(&response);
  stream->WritesDone();
  stream->Finish();
  if (!answered) {
    client_->SkipMember(member);
    return Renewal::kFailed;
  }
  return response.ttl() > 0 ? Renewal::kRenewed : Renewal::kExpired;
}

void EtcdServerLock::KeepAlive() {
  absl::Time last_renewed = absl::Now();
  absl::Duration pause = options_.ttl / 3;
  while (!stop_.WaitForNotificationWithTimeout(pause)) {
    const Renewal renewal = RenewOnce();
    if (renewal == Renewal::kRenewed) {
      last_renewed = absl::Now();
      pause = options_.ttl / 3;
      continue;
    }
    if (renewal == Renewal::kExpired || absl::Now() - last_renewed >= options_.ttl) {
      CKPTFS_LOG(kError) << "lost the etcd lease of "
                         << (options_.key.empty() ? LockKey(options_.key_prefix) : options_.key)
                         << " ("
                         << (renewal == Renewal::kExpired ? "etcd says it expired"
                                                          : "not renewed in time")
                         << ")";
      on_lost_();
      return;
    }
    pause = absl::Milliseconds(200);  // try the next member soon
  }
}

}  // namespace ckptfs::meta
