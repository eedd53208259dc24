// The etcd members `ckptfs up --meta-backend etcd` runs: where the etcd
// binary is, which ports member i uses, and its command line.
//
// A local cluster on etcd runs 3 members on --host: member i serves clients
// on BASE+2i and its peers on BASE+2i+1 (--etcd-port BASE), keeps its data
// in DIR/etcd/member-<i>, and is started with the limits the metadata
// service needs (one checkpoint commit is one etcd transaction over every
// file of the checkpoint: --max-txn-ops=100000, --max-request-bytes=64 MiB).
// A member restarted on its existing data directory ignores the
// --initial-cluster* flags, so `up` after `down` finds the namespace again.
//
// With `tls` (every new local cluster: MakeLocalEtcdTls), the members
// speak TLS to clients and to each other and take only clients that
// present a certificate of the cluster's own CA (--client-cert-auth,
// --peer-client-cert-auth): DIR/etcd/tls holds the CA, the members'
// certificate (for --host, 127.0.0.1 and localhost) and the metadata
// servers' client certificate, keys mode 0600, made once with the openssl
// command. Anyone else who reaches the ports gets nothing.
// Thread-safe (no state).
#ifndef CKPTFS_TOOLS_LOCAL_ETCD_H_
#define CKPTFS_TOOLS_LOCAL_ETCD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ckptfs::tools {

inline constexpr int kEtcdMembers = 3;
// The key prefix the metadata servers of a local cluster use.
inline constexpr char kLocalEtcdPrefix[] = "/ckptfs/";

// $CKPTFS_ETCD_BINARY, else /usr/bin/etcd or /usr/local/bin/etcd; NotFound
// saying what to install otherwise.
absl::StatusOr<std::string> FindEtcdBinary();

struct LocalEtcd {
  std::string binary;
  std::string host;
  uint16_t base_port = 0;
  std::string root;  // DIR/etcd
  bool tls = false;  // see the file comment

  uint16_t ClientPort(int member) const { return static_cast<uint16_t>(base_port + 2 * member); }
  uint16_t PeerPort(int member) const { return static_cast<uint16_t>(base_port + 2 * member + 1); }
  std::string Name(int member) const { return "member-" + std::to_string(member); }
  std::string DataDir(int member) const { return root + "/" + Name(member); }
  // "host:client0,host:client1,host:client2" for --etcd_endpoints.
  std::string Endpoints() const;
  std::string TlsDir() const { return root + "/tls"; }
  std::string CaFile() const { return TlsDir() + "/ca.crt"; }
  std::string MemberCertFile() const { return TlsDir() + "/member.crt"; }
  std::string MemberKeyFile() const { return TlsDir() + "/member.key"; }
  // What the metadata servers present (--etcd_cert_file, --etcd_key_file).
  std::string ClientCertFile() const { return TlsDir() + "/client.crt"; }
  std::string ClientKeyFile() const { return TlsDir() + "/client.key"; }
  // The command line of member `member` (REQUIRES: 0 <= member < kEtcdMembers).
  std::vector<std::string> Argv(int member) const;
};

// Makes etcd.TlsDir() with the CA and the certificates (see the file
// comment) when it does not exist yet; names the openssl step that failed.
absl::Status MakeLocalEtcdTls(const LocalEtcd& etcd);

// Whether a new local cluster on `etcd` gets TLS: yes when TlsDir() exists
// or no member has data yet; no for members whose data predates TLS (their
// stored peer addresses are plain http), with a line on stderr saying how
// to start over with it.
bool LocalEtcdUsesTls(const LocalEtcd& etcd);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_LOCAL_ETCD_H_
