// UpConfig: what `ckptfs up` was asked to start (parsed from its flags by
// cluster_up.cc), and the addresses and ports derived from it: the metadata
// server(s), storage server i on --storage-port + i, the metrics ports, and
// on --meta-backend etcd the local etcd members and the second metadata
// server. Plain data; thread-compatible.
#ifndef CKPTFS_TOOLS_UP_CONFIG_H_
#define CKPTFS_TOOLS_UP_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/tcp.h"
#include "tools/local_etcd.h"

namespace ckptfs::tools {

// The most storage servers one `ckptfs up` starts.
inline constexpr int kMaxServers = 64;

struct UpConfig {
  std::string host;
  uint16_t meta_port = 0;
  uint16_t storage_port = 0;
  int servers = 0;
  int64_t chunk_size = 0;             // 0: the metadata service's default
  int replicas = 2;                   // copies of each chunk of new files
  std::string ec;                     // "K+M": erasure-code new files instead ("" none)
  int64_t orphan_grace_s = -1;        // < 0: the metadata service's default
  int64_t repair_move_after_s = 600;  // the repairer's --move-after-s
  bool repair = true;                 // start the repairer (--no-repair: not)
  uint16_t metrics_port = 0;          // 0: no metrics endpoints
  absl::Duration timeout;
  std::string mountpoint;  // absolute
  std::string meta_binary, storage_binary, fuse_binary;
  // --meta-backend etcd: the etcd members and the standby's port.
  bool on_etcd = false;
  LocalEtcd etcd;
  uint16_t standby_port = 0;

  std::string Address(uint16_t port) const { return HostPort{host, port}.ToString(); }
  // The serving metadata server's address ("meta").
  std::string MetaAddress() const { return Address(meta_port); }
  std::string StandbyAddress() const { return Address(standby_port); }
  // What storage servers, the mount and the tools are given: every
  // metadata server.
  std::string MetaAddresses() const {
    return on_etcd ? MetaAddress() + "," + StandbyAddress() : MetaAddress();
  }
  // Storage server i's list: on etcd, odd ones start at the second server
  // (both serve: their registrations and heartbeats spread).
  std::string StorageMetaAddresses(int i) const {
    return on_etcd && i % 2 == 1 ? StandbyAddress() + "," + MetaAddress() : MetaAddresses();
  }
  uint16_t StoragePort(int i) const { return static_cast<uint16_t>(storage_port + i); }
  // Metrics ports: the service at the base, storage server i at base+1+i,
  // the mount after them.
  uint16_t MetaMetricsPort() const { return metrics_port; }
  uint16_t StorageMetricsPort(int i) const { return static_cast<uint16_t>(metrics_port + 1 + i); }
  uint16_t FuseMetricsPort() const { return static_cast<uint16_t>(metrics_port + 1 + servers); }
};

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_UP_CONFIG_H_
