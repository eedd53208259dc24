// Key layout of the metadata service in its KvStore. Numbers are big-endian
// so that a prefix scan visits inodes, directory entries and servers in
// numeric order, and a directory's entries in bytewise name order.
//
//   i/<ino:8>              InodeRecord          (proto/meta_store.proto)
//   d/<parent:8><name>     DentryRecord
//   o/<ino:8>              OrphanRecord         (file whose last name is gone)
//   s/<id:4>               ServerRecord
//   u/<uuid>               server id (4 bytes)  (uuid -> id index)
//   c/next_ino             next unallocated inode number (8 bytes)
//   c/next_server          next unallocated server id (4 bytes)
//   c/inodes/<shard:1>     signed delta count of inodes in use (8 bytes);
//                          sharded so concurrent creates rarely conflict
//   a/<ckpt:8><rank:4>     a rank's arrival at a checkpoint's commit barrier
//                          (value: the service's wall clock in ms, 8 bytes)
//   k/<ckpt:8>             a PENDING checkpoint (empty value): the index the
//                          service resumes barriers from at start-up
//   h/<ino:8><handle:8>    a reader's hold on a file inside a checkpoint
//                          (OpenRequest.reader_handle; value: the service's
//                          wall clock in ms at the open, 8 bytes)
//
// Thread-safety: pure functions.
#ifndef CKPTFS_SERVER_META_KEYS_H_
#define CKPTFS_SERVER_META_KEYS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace ckptfs::meta {

inline constexpr uint64_t kRootIno = 1;

inline constexpr absl::string_view kInodePrefix = "i/";
inline constexpr absl::string_view kDentryPrefix = "d/";
inline constexpr absl::string_view kOrphanPrefix = "o/";
inline constexpr absl::string_view kServerPrefix = "s/";
inline constexpr absl::string_view kServerUuidPrefix = "u/";
inline constexpr absl::string_view kNextInoKey = "c/next_ino";
inline constexpr absl::string_view kNextServerIdKey = "c/next_server";
inline constexpr absl::string_view kInodeCountPrefix = "c/inodes/";
inline constexpr int kInodeCountShards = 16;
inline constexpr absl::string_view kArrivalPrefix = "a/";
inline constexpr absl::string_view kPendingCheckpointPrefix = "k/";
inline constexpr absl::string_view kReaderHoldPrefix = "h/";

std::string InodeKey(uint64_t ino);
// The prefix of every entry of directory `parent`.
std::string DentryPrefix(uint64_t parent);
std::string DentryKey(uint64_t parent, absl::string_view name);
std::string OrphanKey(uint64_t ino);
std::string ServerKey(uint32_t id);
std::string ServerUuidKey(absl::string_view uuid);
// REQUIRES: 0 <= shard < kInodeCountShards.
std::string InodeCountKey(int shard);

// The prefix of every arrival at checkpoint `ckpt`'s barrier.
std::string ArrivalPrefix(uint64_t ckpt);
std::string ArrivalKey(uint64_t ckpt, uint32_t rank);
// The rank of an a/ key; nullopt if `key` is not one.
std::optional<uint32_t> RankFromArrivalKey(absl::string_view key);
std::string PendingCheckpointKey(uint64_t ckpt);
// The prefix of every reader hold on inode `ino`, and one hold.
std::string ReaderHoldPrefix(uint64_t ino);
std::string ReaderHoldKey(uint64_t ino, uint64_t handle);

// The inode number of an i/, o/, k/ or h/ key; nullopt if `key` is not one.
std::optional<uint64_t> InoFromKey(absl::string_view key);

// Fixed-width big-endian integers, for counters and the uuid index.
std::string EncodeU64(uint64_t value);
std::optional<uint64_t> DecodeU64(absl::string_view bytes);
std::string EncodeU32(uint32_t value);
std::optional<uint32_t> DecodeU32(absl::string_view bytes);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_KEYS_H_
