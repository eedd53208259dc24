// The gRPC target for a list of metadata servers.
//
// Several ckptfs-meta processes may serve one namespace (on etcd: one holds
// the lock and listens, the others wait as standbys and only listen once
// they take over). Clients, storage servers and the tools are given all of
// them as "A,B,..." and reach whichever answers: the list becomes one gRPC
// channel over every address with the pick_first policy (gRPC's default),
// which connects to the first address that accepts and, when that
// connection breaks, tries the list again on the next call. RPCs in flight
// on the broken connection fail with UNAVAILABLE; callers that retry
// UNAVAILABLE (GrpcMetaClient, Registration, `ckptfs up`'s waits) reach the
// next server that way.
//
// When the servers all serve at once (ckptfs-meta --etcd_shared), clients
// should spread over them: SpreadMetaChannelTarget rotates the list by an
// offset drawn once per process, so pick_first starts at a different server
// in different processes and moves on to the next one when it breaks. It is
// harmless with a standby too (a standby does not listen: pick_first skips
// it). Every metadata RPC is answered from the shared store, so a client
// whose calls land on another server after a failover sees the same
// namespace, writer registrations and checkpoint state.
//
// Kept in its own small library (ckptfs_meta_channel, absl only) so the
// storage server and the tools use it without linking the rest of client/.
//
// Thread-safety: pure functions.
#ifndef CKPTFS_COMMON_META_CHANNEL_H_
#define CKPTFS_COMMON_META_CHANNEL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs {

// Splits "A,B,..." into its entries, each trimmed of blanks.
// InvalidArgument on an empty list or an empty entry ("a,,b", "a,").
absl::StatusOr<std::vector<std::string>> SplitMetaAddresses(absl::string_view list);

// The target to create a gRPC channel with for `list`:
//   - one entry: the entry unchanged (any gRPC target: "host:port" with a
//     host name resolved by gRPC's DNS resolver, "ipv4:...", "unix:...");
//   - several entries: each must be "IPv4:port", "localhost:port" (taken as
//     127.0.0.1) or "[IPv6]:port", all of one family; the result is
//     "ipv4:a:p,b:q" or "ipv6:[a]:p,[b]:q". Host names are not resolved
//     here: gRPC's ipv4/ipv6 schemes take numeric addresses only, and
//     resolving once would pin whatever the name meant at start.
// InvalidArgument naming the offending entry otherwise (missing or bad
// port, a host name among several, IPv4 mixed with IPv6).
absl::StatusOr<std::string> MetaChannelTarget(absl::string_view list);

// MetaChannelTarget of `list` rotated left by `offset` entries (modulo the
// list's length): "A,B,C" with offset 1 is the target of "B,C,A". Without
// `offset`, one drawn at random once per process. A single entry is
// unchanged. Errors as MetaChannelTarget.
absl::StatusOr<std::string> SpreadMetaChannelTarget(absl::string_view list);
absl::StatusOr<std::string> SpreadMetaChannelTarget(absl::string_view list, size_t offset);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_META_CHANNEL_H_
