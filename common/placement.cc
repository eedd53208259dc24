// See placement.h.
#include "common/placement.h"

#include <algorithm>

namespace ckptfs {

std::vector<uint32_t> ReplicaServers(const meta::Layout& layout, uint64_t chunk_index) {
  const int copies = ReplicaCount(layout);
  std::vector<uint32_t> servers;
  servers.reserve(static_cast<size_t>(copies));
  for (int r = 0; r < copies; ++r) servers.push_back(ReplicaServer(layout, chunk_index, r));
  return servers;
}

std::vector<uint32_t> ServersHoldingChunks(const meta::Layout& layout, uint64_t chunk_count) {
  // Chunks 0 .. n-1 put copy 0 on every stripe position they reach, and
  // their later copies on the positions just after: chunk_count + copies - 1
  // consecutive positions from 0, or the whole stripe.
  const uint64_t n = static_cast<uint64_t>(layout.stripe_size());
  if (chunk_count == 0) return {};
  const uint64_t used =
      std::min<uint64_t>(n, chunk_count + static_cast<uint64_t>(ReplicaCount(layout)) - 1);
  return std::vector<uint32_t>(layout.stripe().begin(),
                               layout.stripe().begin() + static_cast<int>(used));
}

}  // namespace ckptfs
