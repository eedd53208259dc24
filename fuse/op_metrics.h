// Metrics of the FUSE operations (common/metrics, the default registry):
//
//   ckptfs_fuse_operations_total{op}            requests served, by operation
//   ckptfs_fuse_operation_duration_seconds{op}  from the request's arrival in
//                                               the daemon to its reply
//   ckptfs_fuse_operations_in_flight            requests being served
//   ckptfs_fuse_errors_total{errno}             error replies, by errno name
//   ckptfs_fuse_read_bytes_total                bytes replied to reads
//   ckptfs_fuse_write_bytes_total               bytes accepted by writes
//
// Operations are timed by wrapping the operation table (every operation
// replies before it returns), so no operation's code changes for it.
//
// Thread-safety: everything here may be called from any FUSE worker thread.
// WrapWithMetrics runs once, while the table is built.
#ifndef CKPTFS_FUSE_OP_METRICS_H_
#define CKPTFS_FUSE_OP_METRICS_H_

#include <fuse_lowlevel.h>

#include <cstddef>

namespace ckptfs::fuse {

// Replaces each operation of `ops` with one that counts and times it and
// calls the original. Call at most once per process.
void WrapWithMetrics(fuse_lowlevel_ops* ops);

// An error reply with `err` (ReplyError).
void CountErrorReply(int err);
void CountReadBytes(size_t bytes);
void CountWrittenBytes(size_t bytes);

}  // namespace ckptfs::fuse

#endif  // CKPTFS_FUSE_OP_METRICS_H_
