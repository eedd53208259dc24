// EtcdCluster (etcd_cluster.h): real etcd members for tests.
#include "tests/etcd/etcd_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "proto/etcd/rpc.grpc.pb.h"
#include "tests/integration/local_cluster.h"

namespace ckptfs::testing {
namespace {

absl::StatusOr<etcdserverpb::StatusResponse> MemberStatus(const std::string& address,
                                                          absl::Duration timeout) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = etcdserverpb::Maintenance::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  etcdserverpb::StatusResponse response;
  grpc::Status status = stub->Status(&context, etcdserverpb::StatusRequest(), &response);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("etcd ", address, ": ", status.error_message()));
  }
  return response;
}

}  // namespace

std::string EtcdBinary() {
  for (const char* path : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(int members) {
  if (EtcdBinary().empty()) {
    return absl::FailedPreconditionError("etcd is not installed (apt-get install etcd-server)");
  }
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster());
  absl::StatusOr<std::string> root = MakeTempDir("ckptfs-etcd");
  if (!root.ok()) return root.status();
  cluster->root_ = *root;
  absl::BitGen gen;
  cluster->token_ = absl::StrCat("ckptfs-test-", absl::Uniform<uint64_t>(gen));
  cluster->members_.resize(members);
  for (int i = 0; i < members; ++i) {
    Member& m = cluster->members_[i];
    m.name = absl::StrCat("m", i);
    absl::StatusOr<uint16_t> client = PickFreePort();
    absl::StatusOr<uint16_t> peer = PickFreePort();
    if (!client.ok()) return client.status();
    if (!peer.ok()) return peer.status();
    m.client_port = *client;
    m.peer_port = *peer;
  }
  for (int i = 0; i < members; ++i) {
    if (absl::Status s = cluster->StartMember(i, /*initial=*/true); !s.ok()) return s;
  }
  for (int i = 0; i < members; ++i) {
    if (absl::Status s = cluster->WaitReady(i, absl::Seconds(60)); !s.ok()) {
      return absl::UnavailableError(absl::StrCat(s.message(), "\n", cluster->DescribeLogs()));
    }
  }
  absl::StatusOr<int> leader = cluster->Leader(absl::Seconds(30));
  if (!leader.ok()) return leader.status();
  return cluster;
}

EtcdCluster::~EtcdCluster() {
  for (Member& m : members_) {
    if (m.process != nullptr) m.process->Stop(SIGKILL, absl::Seconds(10));
  }
  if (!root_.empty()) RemoveTree(root_);
}

std::string EtcdCluster::client_address(int i) const {
  return absl::StrCat("127.0.0.1:", members_[i].client_port);
}

std::string EtcdCluster::endpoints() const {
  std::vector<std::string> all;
  for (int i = 0; i < size(); ++i) all.push_back(client_address(i));
  return absl::StrJoin(all, ",");
}

absl::Status EtcdCluster::StartMember(int i, bool initial) {
  Member& m = members_[i];
  std::vector<std::string> peers;
  for (const Member& other : members_) {
    peers.push_back(absl::StrCat(other.name, "=http://127.0.0.1:", other.peer_port));
  }
  const std::string client_url = absl::StrCat("http://127.0.0.1:", m.client_port);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", m.peer_port);
  std::vector<std::string> argv = {
      EtcdBinary(),
      "--name=" + m.name,
      absl::StrCat("--data-dir=", root_, "/", m.name),
      "--listen-client-urls=" + client_url,
      "--advertise-client-urls=" + client_url,
      "--listen-peer-urls=" + peer_url,
      "--initial-advertise-peer-urls=" + peer_url,
      "--initial-cluster=" + absl::StrJoin(peers, ","),
      std::string("--initial-cluster-state=") + (initial ? "new" : "existing"),
      "--initial-cluster-token=" + token_,
      // A checkpoint commit compares every file of the checkpoint in one Txn.
      "--max-txn-ops=100000",
      "--max-request-bytes=67108864",
      // Fast failover for tests: a dead leader is replaced within ~1 s.
      "--heartbeat-interval=50",
      "--election-timeout=500",
      "--logger=zap",
      "--log-level=warn",
  };
  absl::StatusOr<std::unique_ptr<ChildProcess>> process =
      ChildProcess::Start(argv, absl::StrCat(root_, "/", m.name, ".log"));
  if (!process.ok()) return process.status();
  m.process = *std::move(process);
  return absl::OkStatus();
}

absl::Status EtcdCluster::WaitReady(int i, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last;
  while (absl::Now() < deadline) {
    if (members_[i].process == nullptr || !members_[i].process->Running()) {
      return absl::UnavailableError(absl::StrCat("etcd member ", members_[i].name, " exited"));
    }
    absl::StatusOr<etcdserverpb::StatusResponse> status =
        MemberStatus(client_address(i), absl::Seconds(2));
    if (status.ok()) {
      members_[i].id = status->header().member_id();
      return absl::OkStatus();
    }
    last = status.status();
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("etcd member ", members_[i].name, " not ready: ", last.message()));
}

absl::StatusOr<int> EtcdCluster::Leader(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    for (int i = 0; i < size(); ++i) {
      if (members_[i].process == nullptr || !members_[i].process->Running()) continue;
      absl::StatusOr<etcdserverpb::StatusResponse> status =
          MemberStatus(client_address(i), absl::Seconds(1));
      if (!status.ok() || status->leader() == 0) continue;
      for (int j = 0; j < size(); ++j) {
        if (members_[j].id == status->leader() && members_[j].process != nullptr &&
            members_[j].process->Running()) {
          return j;
        }
      }
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError("no etcd leader elected");
}

absl::Status EtcdCluster::Kill(int i) {
  if (members_[i].process == nullptr) return absl::OkStatus();
  members_[i].process->Stop(SIGKILL, absl::Seconds(10));
  members_[i].process.reset();
  return absl::OkStatus();
}

absl::Status EtcdCluster::Restart(int i) {
  if (absl::Status s = StartMember(i, /*initial=*/false); !s.ok()) return s;
  return WaitReady(i, absl::Seconds(60));
}

std::string EtcdCluster::DescribeLogs() const {
  std::string text;
  for (const Member& m : members_) {
    if (m.process != nullptr)
      absl::StrAppend(&text, "--- ", m.name, ":\n", m.process->LogTail(2048));
  }
  return text;
}

}  // namespace ckptfs::testing
