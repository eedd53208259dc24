// EtcdClient (etcd_client.h): member connections and the failover loop.
#include "server/meta/etcd/etcd_client.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <utility>

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

}  // namespace

std::string EtcdPrefixEnd(std::string prefix) {
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

absl::StatusOr<std::vector<std::string>> EtcdClient::ParseEndpoints(absl::string_view list) {
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

absl::StatusOr<std::optional<EtcdClient::Tls>> EtcdClient::LoadTls(const std::string& ca_file,
                                                                   const std::string& cert_file,
                                                                   const std::string& key_file) {
  if (ca_file.empty() && cert_file.empty() && key_file.empty()) return std::nullopt;
  if (ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--etcd_cert_file and --etcd_key_file need --etcd_ca_file, the CA that signed the etcd "
        "members' certificates");
  }
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(
        "--etcd_cert_file and --etcd_key_file go together (the client certificate and its key)");
  }
  auto read = [](const char* flag, const std::string& path) -> absl::StatusOr<std::string> {
    std::ifstream in(path, std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
    }
    if (content.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", path, " is missing or empty (a PEM file is expected)"));
    }
    return content;
  };
  Tls tls;
  absl::StatusOr<std::string> ca = read("--etcd_ca_file", ca_file);
  if (!ca.ok()) return ca.status();
  tls.ca_pem = *std::move(ca);
  if (!cert_file.empty()) {
    absl::StatusOr<std::string> cert = read("--etcd_cert_file", cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = read("--etcd_key_file", key_file);
    if (!key.ok()) return key.status();
    tls.cert_pem = *std::move(cert);
    tls.key_pem = *std::move(key);
  }
  return tls;
}

EtcdClient::EtcdClient(Options options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Reconnect to a restarted member quickly rather than after gRPC's default
  // backoff of up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options_.tls.has_value()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.tls->ca_pem;
    ssl.pem_cert_chain = options_.tls->cert_pem;
    ssl.pem_private_key = options_.tls->key_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  for (const std::string& address : options_.endpoints) {
    auto member = std::make_unique<Member>();
    member->address = address;
    member->channel = grpc::CreateCustomChannel(address, credentials, args);
    member->kv = etcdserverpb::KV::NewStub(member->channel);
    member->lease = etcdserverpb::Lease::NewStub(member->channel);
    members_.push_back(std::move(member));
  }
}

EtcdClient::Member& EtcdClient::current_member() {
  return *members_[current_.load(std::memory_order_relaxed) % members_.size()];
}

void EtcdClient::SkipMember(const Member& member) {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].get() != &member) continue;
    size_t expected = current_.load(std::memory_order_relaxed);
    if (expected % members_.size() == i) {
      current_.compare_exchange_strong(expected, i + 1, std::memory_order_relaxed);
    }
    return;
  }
}

absl::Status EtcdClient::Call(
    absl::string_view what,
    const std::function<grpc::Status(Member&, grpc::ClientContext&)>& attempt,
    const std::function<absl::StatusOr<bool>()>& applied) {
  const absl::Time deadline = absl::Now() + options_.call_timeout;
  absl::Duration backoff = absl::Milliseconds(20);
  bool unknown_outcome = false;
  for (;;) {
    if (unknown_outcome && applied) {
      absl::StatusOr<bool> done = applied();
      if (!done.ok()) return done.status();  // could not even read: give up
      if (*done) return absl::OkStatus();
    }
    Member& member = current_member();
    grpc::ClientContext context;
    context.set_deadline(
        absl::ToChronoTime(std::min(deadline, absl::Now() + options_.attempt_timeout)));
    const grpc::Status status = attempt(member, context);
    if (status.ok()) return absl::OkStatus();
    if (!IsConnectionFailure(status)) return EtcdError(what, member.address, status);
    // This member is down or has no leader: try the next one.
    SkipMember(member);
    unknown_outcome = true;
    if (absl::Now() + backoff >= deadline) {
      return ErrnoStatus(
          EIO,
          absl::StrCat("etcd ", what, ": no member of ", absl::StrJoin(options_.endpoints, ", "),
                       " answered within ", absl::FormatDuration(options_.call_timeout),
                       "; last error from ", member.address, ": ", status.error_message()));
    }
    CKPTFS_LOG(kWarning) << "etcd member " << member.address << " failed " << what << " ("
                         << status.error_message() << "); trying the next member";
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(const std::string& key,
                                                              const std::string& range_end,
                                                              int64_t limit) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  if (!range_end.empty()) request.set_range_end(range_end);
  request.set_limit(limit);
  etcdserverpb::RangeResponse response;
  absl::Status status = Call("Range", [&](Member& member, grpc::ClientContext& context) {
    response.Clear();
    return member.kv->Range(&context, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  etcdserverpb::LeaseGrantResponse response;
  absl::Status status = Call("LeaseGrant", [&](Member& member, grpc::ClientContext& context) {
    response.Clear();
    return member.lease->LeaseGrant(&context, request, &response);
  });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return ErrnoStatus(EIO, absl::StrCat("etcd LeaseGrant: ", response.error()));
  }
  return response.id();
}

void EtcdClient::RevokeLease(int64_t id) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& member = current_member();
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.attempt_timeout));
    etcdserverpb::LeaseRevokeResponse response;
    if (member.lease->LeaseRevoke(&context, request, &response).ok()) return;
    SkipMember(member);
  }
}

}  // namespace ckptfs::meta
