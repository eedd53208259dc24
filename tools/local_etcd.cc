// See local_etcd.h.
#include "tools/local_etcd.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tcp.h"

namespace ckptfs::tools {

absl::StatusOr<std::string> FindEtcdBinary() {
  if (const char* env = std::getenv("CKPTFS_ETCD_BINARY"); env != nullptr && *env != '\0') {
    if (::access(env, X_OK) == 0) return std::string(env);
    return absl::NotFoundError(
        absl::StrCat("CKPTFS_ETCD_BINARY=", env, " is not an executable file"));
  }
  for (const char* path : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (::access(path, X_OK) == 0) return std::string(path);
  }
  return absl::NotFoundError(
      "--meta-backend etcd needs etcd: install it (apt-get install etcd-server) or set "
      "CKPTFS_ETCD_BINARY to its path");
}

std::string LocalEtcd::Endpoints() const {
  std::vector<std::string> endpoints;
  for (int i = 0; i < kEtcdMembers; ++i) {
    endpoints.push_back(HostPort{host, ClientPort(i)}.ToString());
  }
  return absl::StrJoin(endpoints, ",");
}

std::vector<std::string> LocalEtcd::Argv(int member) const {
  std::vector<std::string> peers;
  for (int i = 0; i < kEtcdMembers; ++i) {
    peers.push_back(absl::StrCat(Name(i), "=http://", HostPort{host, PeerPort(i)}.ToString()));
  }
  const std::string client_url = "http://" + HostPort{host, ClientPort(member)}.ToString();
  const std::string peer_url = "http://" + HostPort{host, PeerPort(member)}.ToString();
  return {
      binary,
      "--name=" + Name(member),
      "--data-dir=" + DataDir(member),
      "--listen-client-urls=" + client_url,
      "--advertise-client-urls=" + client_url,
      "--listen-peer-urls=" + peer_url,
      "--initial-advertise-peer-urls=" + peer_url,
      "--initial-cluster=" + absl::StrJoin(peers, ","),
      "--initial-cluster-state=new",
      "--initial-cluster-token=ckptfs-local",
      // A checkpoint commit compares every file of the checkpoint in one Txn.
      "--max-txn-ops=100000",
      "--max-request-bytes=67108864",
      "--logger=zap",
      "--log-level=warn",
  };
}

}  // namespace ckptfs::tools
