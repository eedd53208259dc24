// SyncStorageServers: the durability step of a checkpoint commit — one SYNC
// with whole_store (a syncfs of the server's data directory) to every
// storage server holding chunks of the checkpoint, all at once, naming the
// incarnations of the server that acknowledged the checkpoint's unsynced
// writes: a server that restarted since refuses (proto/data.proto).
//
// Thread-safety: thread-safe; blocks the caller until every server answered
// or timed out. Each server is called from its own short-lived thread.
#ifndef CKPTFS_SERVER_META_CHECKPOINT_STORE_SYNC_H_
#define CKPTFS_SERVER_META_CHECKPOINT_STORE_SYNC_H_

#include <cstdint>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/meta/membership.h"

namespace ckptfs::meta {

// Sends SYNC(whole_store) to each server of `servers` in parallel, with
// written_by its incarnations there, and waits for all. OK when every one
// succeeded (an id never registered holds nothing and is skipped).
// Otherwise EIO naming the first server, in id order, that could not be
// reached or failed (by id and address), and why. A server is dialed
// whatever its heartbeat says: one that is down fails. `timeout` bounds the
// connect and the wait for each answer.
absl::Status SyncStorageServers(Membership& membership,
                                const std::map<uint32_t, std::set<uint64_t>>& servers,
                                absl::Duration timeout);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CHECKPOINT_STORE_SYNC_H_
