// StartCluster: the starting half of `ckptfs up`, once its flags are parsed
// and checked (cluster_up.cc). It starts, in order, the local etcd members
// (--meta-backend etcd), the metadata server(s), the storage servers, the
// FUSE mount and the repairer (`ckptfs repair --watch`), waits until each is
// ready, and records what it started in the state directory's cluster.state
// after every daemon, so that `ckptfs down` can always clean up. If a step
// fails it prints the failing daemon's log tail and stops what it started
// (and any process still holding the LOCK of a data directory it gave a
// storage server, which it names).
// Each daemon whose build has --metrics_listen (its binary names the flag,
// so older daemons still start) serves Prometheus metrics on a port of its
// own from --metrics-port on; the ports are recorded and printed.
// Runs on main's thread only.
#ifndef CKPTFS_TOOLS_CLUSTER_STARTER_H_
#define CKPTFS_TOOLS_CLUSTER_STARTER_H_

#include <string>

#include "tools/state_dir.h"
#include "tools/up_config.h"

namespace ckptfs::tools {

// Starts the cluster `config` describes with its state in `dir` (locked by
// the caller). `credential`: the cluster's, read from dir.CredentialFile();
// every daemon and the mount are given that file. Returns the exit status:
// 0 with a summary of the cluster printed, 1 after a failure was reported
// and everything started was stopped.
int StartCluster(UpConfig config, StateDir dir, std::string credential);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_CLUSTER_STARTER_H_
