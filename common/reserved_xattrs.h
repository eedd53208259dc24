// The names of ckptfs's extended attributes and the rank limit of a
// checkpoint (docs/checkpoints.md; the chunk-size layout
// attribute), in one place for the metadata service, the client library,
// the mount, the tools and the bench. What each does is documented where it
// is served: client/checkpoint_xattr_parsing.h (the checkpoint protocol at the
// mount) and server/meta/checkpoint/xattr_rules.h (the stored ones the
// service checks).
#ifndef CKPTFS_COMMON_RESERVED_XATTRS_H_
#define CKPTFS_COMMON_RESERVED_XATTRS_H_

#include <cstdint>

namespace ckptfs {

// The most ranks a checkpoint may declare.
inline constexpr uint32_t kMaxCheckpointRanks = 1u << 20;

// Every name under this prefix is reserved for ckptfs.
inline constexpr char kCkptfsXattrPrefix[] = "user.ckptfs.";

// Stored on directories, checked by the service.
inline constexpr char kChunkSizeXattr[] = "user.ckptfs.chunk_size";
// How many copies of each chunk files created in the directory keep
// ("1" .. "8"); new subdirectories copy it from their parent. Files elsewhere
// get the cluster's default (ckptfs-meta --replicas).
inline constexpr char kReplicasXattr[] = "user.ckptfs.replicas";
// Erasure coding of files created in the directory instead of copies:
// "K+M" (K data and M parity fragments per chunk, e.g. "4+2"), or "none" to
// use copies where the cluster's default is erasure coding (ckptfs-meta
// --ec); new subdirectories copy it from their parent.
inline constexpr char kErasureCodeXattr[] = "user.ckptfs.ec";
inline constexpr char kCommitTimeoutXattr[] = "user.ckptfs.commit_timeout_s";
inline constexpr char kKeepXattr[] = "user.ckptfs.keep";
// On a run directory: the name of the symlink by which it points at its
// newest committed checkpoint — a file name in it, or "" for no symlink at
// all (a framework that keeps its own file called `latest`, as DeepSpeed
// does). Unset: "latest". Not copied to new subdirectories (a run directory
// is where the checkpoints are, not what is below it).
inline constexpr char kLatestNameXattr[] = "user.ckptfs.latest_name";
inline constexpr char kDefaultLatestName[] = "latest";

// The checkpoint protocol, served by the client library.
inline constexpr char kRanksXattr[] = "user.ckptfs.ranks";
inline constexpr char kCommitXattr[] = "user.ckptfs.commit";
inline constexpr char kCommitRankXattrPrefix[] = "user.ckptfs.commit.";
inline constexpr char kRemoveXattr[] = "user.ckptfs.remove";
inline constexpr char kStateXattr[] = "user.ckptfs.state";
inline constexpr char kInfoXattr[] = "user.ckptfs.info";
inline constexpr char kCheckpointsXattr[] = "user.ckptfs.checkpoints";
inline constexpr char kLatestXattr[] = "user.ckptfs.latest";

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_RESERVED_XATTRS_H_
