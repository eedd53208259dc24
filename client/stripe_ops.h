// Operations that touch every storage server of a file's stripe set at
// once: TRIM before a truncate reaches the metadata service, SYNC for fsync.
// The requests run in parallel on the IoExecutor; the caller waits for all.
//
// Thread-safety: thread-safe. REQUIRES: not called from an IoExecutor task
// (it waits for other tasks).
#ifndef CKPTFS_CLIENT_STRIPE_OPS_H_
#define CKPTFS_CLIENT_STRIPE_OPS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "client/chunk_transport.h"
#include "client/io_executor.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

// Runs op(server_id) for each id (duplicates once) in parallel and returns
// the first error, or OK.
absl::Status ForEachServer(IoExecutor& executor, std::vector<uint32_t> server_ids,
                           const std::function<absl::Status(uint32_t)>& op);

// TRIM (ino, trim_size, chunk_size) on every server of the stripe set.
absl::Status TrimStripe(ChunkTransport& transport, IoExecutor& executor, uint64_t ino,
                        const meta::Layout& layout, uint64_t trim_size);

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_STRIPE_OPS_H_
