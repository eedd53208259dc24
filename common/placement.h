// Placement: which storage servers hold the copies of a file's chunks.
//
// A file's layout (proto/meta.proto, Layout) names its stripe, the storage
// servers in order, and how many copies each chunk keeps. Copy r of chunk i
// lives on stripe[(i + r) % stripe.size()], r in [0, replicas): consecutive
// chunks start on consecutive servers, and a chunk's copies sit on
// consecutive, distinct servers. This one rule is shared by the client (which
// writes and reads the copies), the metadata service (which SYNCs the servers
// of a checkpoint's files at commit) and the tools (ckpt verify). Pure
// arithmetic: safe from any thread.
#ifndef CKPTFS_COMMON_PLACEMENT_H_
#define CKPTFS_COMMON_PLACEMENT_H_

#include <cstdint>
#include <vector>

#include "proto/meta.pb.h"

namespace ckptfs {

// Whether the layout erasure-codes its chunks (fragments instead of copies).
inline bool IsErasureCoded(const meta::Layout& layout) { return layout.ec_data() > 0; }

// Servers each chunk is stored on: its copies, layout.replicas() (0, a
// layout from before replication, means 1), or for an erasure-coded layout
// its ec_data + ec_parity fragments (fragment r where copy r would be), so
// that SYNC, placement and writes reach every piece of a chunk alike.
inline int ReplicaCount(const meta::Layout& layout) {
  if (IsErasureCoded(layout)) return static_cast<int>(layout.ec_data() + layout.ec_parity());
  return layout.replicas() == 0 ? 1 : static_cast<int>(layout.replicas());
}

// The storage server id holding copy `replica` of chunk `chunk_index`.
// REQUIRES: a non-empty stripe, 0 <= replica < ReplicaCount(layout) <=
// stripe size (client/layout.h, ValidateLayout).
inline uint32_t ReplicaServer(const meta::Layout& layout, uint64_t chunk_index, int replica) {
  const uint64_t n = static_cast<uint64_t>(layout.stripe_size());
  return layout.stripe(static_cast<int>((chunk_index % n + static_cast<uint64_t>(replica)) % n));
}

// The storage server ids holding chunk `chunk_index`, copy 0 first: the
// servers a write goes to, and a read tries.
// REQUIRES: as ReplicaServer.
std::vector<uint32_t> ReplicaServers(const meta::Layout& layout, uint64_t chunk_index);

// The storage server ids holding any copy of any chunk of a file of
// `chunk_count` chunks, each once, in stripe order (what SYNC must reach).
// REQUIRES: as ReplicaServer.
std::vector<uint32_t> ServersHoldingChunks(const meta::Layout& layout, uint64_t chunk_count);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_PLACEMENT_H_
