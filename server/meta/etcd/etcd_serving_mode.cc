// See etcd_serving_mode.h.
#include "server/meta/etcd/etcd_serving_mode.h"

#include <utility>

#include <unistd.h>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/log.h"

namespace ckptfs::meta {
namespace {

constexpr char kSharedTag[] = ", shared)";

}  // namespace

std::string SharedHolderName(const std::string& listen, int pid) {
  return absl::StrCat(listen, " (pid ", pid, kSharedTag);
}

bool IsSharedHolderName(const std::string& holder) { return absl::EndsWith(holder, kSharedTag); }

std::string SharedPresencePrefix(const std::string& key_prefix) {
  return absl::StrCat(absl::StripSuffix(key_prefix, "/"), ".shared/");
}

absl::Status CheckNoSharedServers(EtcdClient& client, const std::string& key_prefix) {
  const std::string prefix = SharedPresencePrefix(key_prefix);
  absl::StatusOr<etcdserverpb::RangeResponse> present =
      client.Range(prefix, EtcdPrefixEnd(prefix), 1);
  if (!present.ok()) return present.status();
  if (present->kvs_size() == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "metadata server ", absl::StripPrefix(present->kvs(0).key(), prefix),
      " serves the etcd prefix ", key_prefix,
      " together with others (--etcd_shared): start this one with --etcd_shared too, or stop "
      "them first (one that died leaves its key for its --etcd_lock_ttl_s); one server serving "
      "alone beside them would split the commit barriers"));
}

absl::Status CheckNoExclusiveServer(EtcdClient& client, const std::string& key_prefix) {
  absl::StatusOr<etcdserverpb::RangeResponse> lock =
      client.Range(EtcdServerLock::LockKey(key_prefix), "", 1);
  if (!lock.ok()) return lock.status();
  if (lock->kvs_size() == 0 || IsSharedHolderName(lock->kvs(0).value())) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "metadata server ", lock->kvs(0).value(), " serves the etcd prefix ", key_prefix,
      " alone (started without --etcd_shared): stop it first, or start this one without "
      "--etcd_shared to wait as its standby"));
}

absl::StatusOr<std::unique_ptr<SharedPresence>> SharedPresence::Register(
    std::shared_ptr<EtcdClient> client, const std::string& key_prefix, const std::string& holder,
    absl::Duration ttl, absl::Duration wait, std::function<void(const absl::Status&)> on_conflict) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  absl::BitGen bits;
  EtcdServerLock::Options options;
  options.key_prefix = key_prefix;
  options.key = absl::StrCat(SharedPresencePrefix(key_prefix), holder, " on ",
                             host[0] != '\0' ? host : "(unknown host)", " #",
                             absl::Hex(absl::Uniform<uint64_t>(bits)));
  options.holder = holder;
  options.ttl = ttl;
  std::unique_ptr<SharedPresence> presence(
      new SharedPresence(std::move(client), options, std::move(on_conflict)));
  absl::StatusOr<std::unique_ptr<EtcdServerLock>> key = presence->Take(wait);
  if (!key.ok()) return key.status();
  if (absl::Status s = CheckNoExclusiveServer(*presence->client_, key_prefix); !s.ok()) {
    return s;  // `key` goes out of scope: its lease is revoked
  }
  presence->key_ = *std::move(key);
  presence->thread_ = std::thread([p = presence.get()] { p->Loop(); });
  return presence;
}

SharedPresence::SharedPresence(std::shared_ptr<EtcdClient> client, EtcdServerLock::Options options,
                               std::function<void(const absl::Status&)> on_conflict)
    : client_(std::move(client)),
      options_(std::move(options)),
      on_conflict_(std::move(on_conflict)) {}

SharedPresence::~SharedPresence() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  key_.reset();
}

absl::StatusOr<std::unique_ptr<EtcdServerLock>> SharedPresence::Take(absl::Duration wait) {
  EtcdServerLock::Options options = options_;
  options.wait = wait;
  options.cancelled = [this] {
    absl::MutexLock lock(&mu_);
    return stopping_;
  };
  return EtcdServerLock::Acquire(client_, std::move(options), [this] {
    absl::MutexLock lock(&mu_);
    lost_ = true;
  });
}

void SharedPresence::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_ || lost_; };
      mu_.Await(absl::Condition(&woken));
      if (stopping_) return;
      lost_ = false;
    }
    key_.reset();
    CKPTFS_LOG(kWarning) << "lost the presence key " << options_.key << "; writing it again";
    absl::StatusOr<std::unique_ptr<EtcdServerLock>> key = Take(absl::InfiniteDuration());
    if (!key.ok()) return;  // cancelled: stopping
    key_ = *std::move(key);
    if (absl::Status s = CheckNoExclusiveServer(*client_, options_.key_prefix);
        absl::IsFailedPrecondition(s)) {
      CKPTFS_LOG(kError) << "while this server's presence key was gone: " << s.message();
      if (on_conflict_) on_conflict_(s);
    } else if (!s.ok()) {
      CKPTFS_LOG(kWarning) << "cannot check for a server serving the prefix alone after "
                              "writing the presence key again: "
                           << s.message();
    }
  }
}

}  // namespace ckptfs::meta
