// EtcdCluster: a real etcd cluster for tests — N members (etcd-server from
// Debian, `etcd` on PATH) on 127.0.0.1 with free ports, data in a fresh
// temporary directory, configured as ckptfs needs (large transactions) and
// with short raft timeouts so that a killed leader is replaced in about a
// second.
//
// The cluster owns its member processes: the destructor kills them (and they
// die with the test binary, PR_SET_PDEATHSIG) and removes the directory.
// Thread-safety: not thread-safe; owned by one test.
#ifndef CKPTFS_TESTS_ETCD_ETCD_CLUSTER_H_
#define CKPTFS_TESTS_ETCD_ETCD_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/integration/child_process.h"

namespace ckptfs::testing {

// The etcd binary, or "" when etcd-server is not installed.
std::string EtcdBinary();

class EtcdCluster {
 public:
  // Starts `members` members and waits until the cluster has a leader.
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(int members = 3);
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;
  ~EtcdCluster();

  int size() const { return static_cast<int>(members_.size()); }
  // host:port of member i's client URL.
  std::string client_address(int i) const;
  // Every member's client address, comma-separated.
  std::string endpoints() const;
  // The index of the current leader (asked of a live member), or an error if
  // no live member knows one within `timeout`.
  absl::StatusOr<int> Leader(absl::Duration timeout = absl::Seconds(10));
  // SIGKILL member i (it stays down until Restart).
  absl::Status Kill(int i);
  // Starts member i again on its ports and data (it rejoins the cluster).
  absl::Status Restart(int i);
  std::string DescribeLogs() const;

 private:
  struct Member {
    std::string name;
    uint16_t client_port = 0;
    uint16_t peer_port = 0;
    uint64_t id = 0;  // raft member id, learned from a response header
    std::unique_ptr<ChildProcess> process;
  };
  EtcdCluster() = default;
  absl::Status StartMember(int i, bool initial);
  // Waits until member i answers Maintenance.Status; records its id.
  absl::Status WaitReady(int i, absl::Duration timeout);

  std::string root_;
  std::string token_;
  std::vector<Member> members_;
};

}  // namespace ckptfs::testing

#endif  // CKPTFS_TESTS_ETCD_ETCD_CLUSTER_H_
