// Namespace: the filesystem tree of ckptfs — inodes, directory entries,
// attributes, xattrs and file layouts — as operations over the KvStore,
// independent of gRPC so that tests call it directly.
//
// Every mutating operation is one KV transaction with compares on what it
// read, retried on conflicts (server/meta/meta_txn.h); reads are single Gets
// or Scans. Each operation is defined in its own file under server/meta/ops/.
// Errors carry a POSIX errno (common/errno_status.h): an unknown inode or
// name is ENOENT, an invalid name ENAMETOOLONG/EINVAL, and so on as POSIX
// says for the system call the operation serves.
//
// Invariants kept by every operation: a directory's nlink is 2 + its
// subdirectories; any other inode's nlink is its number of names (hard
// links, ops/link.cc); adding or removing an entry sets the directory's
// mtime and ctime, and adding or removing a name sets the inode's ctime; a
// regular file whose last name goes becomes an orphan (o/<ino>, its inode
// kept with nlink 0 so open handles still stat it) until the orphan
// reclaimer trims its chunks and deletes it.
//
// Checkpoints (docs/checkpoints.md; the transactions
// themselves are in server/meta/checkpoint/): a new inode inherits
// in_checkpoint from its parent; every mutating operation but Unlink and
// Rmdir refuses, with EROFS, to change anything inside an ended (COMMITTED,
// ABORTED or REMOVING) checkpoint (checkpoint/mutation_guard.h); the first Unlink or
// Rmdir inside a COMMITTED one makes it REMOVING and moves `latest` off it
// (checkpoint/name_removal.h); a checkpoint directory is removed by
// RemoveCheckpoint or, once ended and empty, by Rmdir (EBUSY while pending;
// Rename over it: EROFS once ended, EBUSY while pending); a directory is
// never renamed across a checkpoint boundary
// (EXDEV: `mv` copies instead), while a file or symlink with one name
// renamed across one takes the in_checkpoint of its new parent (one with
// more names does not cross: EXDEV; the hard-link rule is in ops/link.cc). Handles that may write
// are registered on the file (writer_handles) until released, and a failed write marks the file
// damaged until it is truncated to 0. Read-only handles of files inside checkpoints are registered
// as readers (h/ keys) until released, so that a removed checkpoint's file keeps its chunks while
// read.
//
// Thread-safety: thread-safe; all methods may be called concurrently. The
// KvStore, Membership and Clock are borrowed and must outlive the Namespace.
#ifndef CKPTFS_SERVER_META_NAMESPACE_H_
#define CKPTFS_SERVER_META_NAMESPACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/reserved_xattrs.h"
#include "proto/meta.pb.h"
#include "proto/meta_store.pb.h"
#include "server/meta/clock.h"
#include "server/meta/inode_allocator.h"
#include "server/meta/kv_store.h"
#include "server/meta/membership.h"

namespace ckptfs::meta {

// The directory xattr that sets the chunk size of files created in it; new
// subdirectories copy it from their parent.
inline constexpr uint32_t kMinChunkSize = 64u << 10;
inline constexpr uint32_t kMaxChunkSize = 64u << 20;
inline constexpr size_t kMaxXattrNameLength = 255;   // XATTR_NAME_MAX
inline constexpr size_t kMaxXattrValueSize = 65536;  // XATTR_SIZE_MAX
inline constexpr size_t kMaxSymlinkTarget = 4095;    // PATH_MAX - 1
// All xattr names and values of one inode together (they live in the inode
// record, which every stat reads).
inline constexpr size_t kMaxXattrBytesPerInode = 1u << 20;

// OK if `chunk_size` is a power of two in [kMinChunkSize, kMaxChunkSize].
absl::Status ValidateChunkSize(uint64_t chunk_size);

// The most copies kReplicasXattr (common/reserved_xattrs.h) or
// Options::default_replicas may ask for.
inline constexpr uint32_t kMaxReplicas = 8;

// Erasure coding of new files: k data + m parity fragments per chunk; k == 0
// means none (copies).
struct ErasureCodeSpec {
  uint32_t k = 0;
  uint32_t m = 0;
  bool enabled() const { return k > 0; }
};
// The most fragments a chunk may have (common/erasure_code.h).
inline constexpr uint32_t kMaxErasureFragments = 32;
// Parses "K+M" (K >= 2, M >= 1, K + M <= kMaxErasureFragments; optionally
// one trailing "\n") or "none"; EINVAL naming the rule otherwise.
absl::StatusOr<ErasureCodeSpec> ParseErasureCode(absl::string_view value);

// OK if `replicas` is in [1, kMaxReplicas]; EINVAL otherwise.
absl::Status ValidateReplicas(uint64_t replicas);
// The replica count `value` (a user.ckptfs.replicas value: decimal digits,
// optionally one trailing "\n") names; EINVAL if it is not one.
absl::StatusOr<uint32_t> ParseReplicas(absl::string_view value);

class Namespace {
 public:
  struct Options {
    uint32_t default_chunk_size = 4u << 20;
    // Copies of each chunk of a new file in a directory without
    // user.ckptfs.replicas; in [1, kMaxReplicas].
    uint32_t default_replicas = 1;
    // Erasure coding of new files in a directory without user.ckptfs.ec
    // (none: copies, default_replicas).
    ErasureCodeSpec default_ec;
    // How long an unlinked file's chunks outlive its last name.
    absl::Duration orphan_grace = absl::Hours(1);
    uint32_t readdir_default_limit = 1024;
    uint32_t readdir_max_limit = 16384;
  };

  Namespace(KvStore* kv, Membership* membership, Clock* clock, const Options& options);
  Namespace(const Namespace&) = delete;
  Namespace& operator=(const Namespace&) = delete;

  // Creates the root directory (inode 1, 0755, uid/gid 0) if the store has
  // none. Call once before serving; harmless on an existing store.
  absl::Status Init();

  // --- Reads (server/meta/ops/lookup.cc) ---
  // The attributes of entry `name` of directory `parent`. ENOTDIR if `parent`
  // is not a directory.
  absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name);
  absl::StatusOr<Attr> GetAttr(uint64_t ino);
  // GetAttr, with the file's WrittenChunks when request.with_written (a
  // regular file's; unknown for one from before they were kept).
  absl::StatusOr<AttrReply> GetAttr(const InodeRequest& request);
  // A symlink's target; EINVAL for anything else.
  absl::StatusOr<std::string> ReadLink(uint64_t ino);

  // --- Attributes (ops/setattr.cc) ---
  // Applies the fields named by request.valid (SetAttrField bits). Mode keeps
  // the type bits. SET_SIZE on a directory is EISDIR, on a symlink EINVAL
  // (the caller has already trimmed storage). ctime always advances; a size
  // change also sets mtime.
  absl::StatusOr<Attr> SetAttr(const SetAttrRequest& request);

  // --- Creation (ops/create.cc) ---
  // Creates regular file `name` in `parent`, or opens the existing one
  // (reply.created false): EEXIST if it exists and request.exclusive; EISDIR
  // if it is a directory; with request.truncate an existing file's size
  // becomes 0. A new file gets a layout: the parent's user.ckptfs.chunk_size
  // or the default chunk size, the parent's user.ckptfs.ec or the default
  // erasure code (which, when set, replaces copies), else the parent's
  // user.ckptfs.replicas or the default replica count, and a stripe of every alive storage server
  // rotated by the inode number; EIO if no storage server is alive, ENOSPC
  // (naming both numbers) if fewer are alive than the file needs copies or
  // fragments.
  absl::StatusOr<CreateReply> Create(const CreateRequest& request);
  // EEXIST if the name exists. The new directory copies the parent's
  // user.ckptfs.chunk_size, user.ckptfs.replicas and user.ckptfs.ec xattrs.
  absl::StatusOr<Attr> Mkdir(const MkdirRequest& request);
  // A symlink (mode S_IFLNK|0777) to request.target (1..4095 bytes, no NUL).
  absl::StatusOr<Attr> Symlink(const SymlinkRequest& request);
  // A FIFO, socket or device node (request.mode's type bits; EINVAL for any
  // other type); rdev is kept for device nodes. EEXIST if the name exists.
  absl::StatusOr<Attr> Mknod(const MknodRequest& request);

  // --- Hard links (ops/link.cc) ---
  // A new name for inode request.ino; returns its attributes (nlink
  // counted). EPERM for a directory, ENOENT for an inode with no name left,
  // EEXIST if the name exists, EMLINK past 65000 names, EXDEV across a
  // checkpoint boundary (ops/link.cc says which links a checkpoint takes).
  absl::StatusOr<Attr> Link(const LinkRequest& request);

  // --- Removal (ops/remove.cc) ---
  // Removes a non-directory name; EISDIR for a directory. A regular file's
  // last name going makes it an orphan. Inside a COMMITTED checkpoint it
  // also makes the checkpoint REMOVING (checkpoint/name_removal.h).
  absl::Status Unlink(uint64_t parent, absl::string_view name);
  // Removes an empty directory; ENOTDIR if `name` is not one, ENOTEMPTY if it
  // has entries, EBUSY if it is a PENDING checkpoint. Inside a COMMITTED
  // checkpoint, or of an empty one, as Unlink for `latest` and the state.
  absl::Status Rmdir(uint64_t parent, absl::string_view name);

  // --- Rename (ops/rename.cc) ---
  // Atomically moves parent/name to new_parent/new_name, replacing a
  // non-directory target (which, a regular file, becomes an orphan) or an
  // empty directory target. POSIX errors: EISDIR (file over directory),
  // ENOTDIR (directory over file), ENOTEMPTY (non-empty target directory),
  // EINVAL (a directory into its own subtree), EEXIST (target exists and
  // request.no_replace). Renaming a name onto itself is a no-op.
  absl::Status Rename(const RenameRequest& request);

  // --- Listing (ops/readdir.cc) ---
  // Up to `limit` entries (0: the default page; larger than the maximum page:
  // clamped; a page also ends at about 1 MiB of names) whose names sort
  // bytewise after `start_after`; `more` says whether entries follow. "."
  // and ".." are not listed (the mount adds them), nor are subdirectories
  // that are PENDING, ABORTED or REMOVING checkpoints (Lookup still finds
  // them).
  // ENOTDIR for a non-directory.
  absl::StatusOr<ReadDirReply> ReadDir(uint64_t ino, absl::string_view start_after, uint32_t limit);

  // --- File data (ops/write.cc) ---
  // The attributes to open request.ino with; with truncate (regular files
  // only, EISDIR for a directory) the size becomes 0 (storage already
  // trimmed) and the file is no longer damaged; a nonzero writer_handle is
  // registered as a writer of the file (regular files only; again:
  // harmless). Truncating or registering inside an ended checkpoint: EROFS.
  absl::StatusOr<Attr> Open(const OpenRequest& request);
  absl::StatusOr<Attr> Open(uint64_t ino, bool truncate);
  // Close-to-open publication of a writer's data: size becomes
  // max(stored size, size); mtime becomes mtime_ns (0: the service's clock).
  // release_writer's registration is removed; failed marks the file damaged
  // (the caller then aborts a PENDING checkpoint holding it); the unsynced
  // storage-server incarnations are kept with the file (until a truncation
  // to 0) for the checkpoint commit's syncs to check. EISDIR /
  // EINVAL for a directory / symlink. Inside an ended checkpoint a growth or
  // failed is EROFS, and anything else only releases the writer.
  // durable: the commit reaches stable storage before this returns (fsync).
  absl::StatusOr<Attr> CommitWrite(const CommitWriteRequest& request);
  absl::StatusOr<Attr> CommitWrite(uint64_t ino, uint64_t size, int64_t mtime_ns,
                                   bool durable = false);

  // --- Readers of checkpoint files (ops/reader_hold.cc) ---
  // A read-only open of `ino` by handle `reader_handle` (nonzero): the
  // attributes, as GetAttr's; for a regular file inside a checkpoint the
  // handle is also registered as a reader (h/ key), which keeps the file's
  // chunks if the checkpoint is removed while it is open (OrphanRecord.
  // reclaim_when_unread; the orphan grace at most), and `held` is true. An
  // orphan whose reclamation is due (or begun): ENOENT.
  struct ReadOpen {
    Attr attr;
    bool held = false;
  };
  absl::StatusOr<ReadOpen> OpenToRead(uint64_t ino, uint64_t reader_handle);
  // Ends the hold of `reader_handle` on `ino`; OK if there is none.
  absl::Status ReleaseReader(uint64_t ino, uint64_t reader_handle);

  // --- Repair (ops/move_stripe.cc) ---
  // Moves regular file `ino`'s copies off storage server `from`: every
  // `from` in its layout's stripe becomes `to`, ctime advances, and the new
  // attributes are returned (an orphan's reclamation record moves too).
  // Allowed inside ended checkpoints (it moves bytes, it does not change
  // them). EINVAL when `from` == `to`, `to` is not a registered server, or
  // the stripe already holds `to`; ESTALE when it does not hold `from`
  // (moved already); ENOENT, EISDIR, EINVAL (a symlink) as usual.
  absl::StatusOr<Attr> MoveStripeServer(uint64_t ino, uint32_t from, uint32_t to);

  // --- Extended attributes (ops/xattr.cc) ---
  // Names: 1..255 bytes (ERANGE otherwise, as Linux), no NUL (EINVAL); values at
  // most 64 KiB (E2BIG); at most 1 MiB of xattrs per inode (ENOSPC).
  // create_only: EEXIST if present; replace_only:
  // ENODATA if absent. user.ckptfs.chunk_size must be a decimal power of two
  // in [64 KiB, 64 MiB], user.ckptfs.replicas a decimal in [1, 8] (on a
  // directory only), user.ckptfs.commit_timeout_s and user.ckptfs.keep
  // positive decimals (EINVAL), user.ckptfs.latest_name a file name or ""
  // (on a directory only; setting or removing it renames the directory's
  // `latest` symlink in the same transaction, EEXIST if the new name is an
  // entry that is not a symlink: checkpoint/latest.h); other user.ckptfs.
  // names are reserved (EINVAL, also for RemoveXattr; see
  // checkpoint/xattr_rules.h).
  absl::Status SetXattr(const SetXattrRequest& request);
  // ENODATA if `name` is not set.
  absl::StatusOr<std::string> GetXattr(uint64_t ino, absl::string_view name);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino);
  // ENODATA if `name` is not set.
  absl::Status RemoveXattr(uint64_t ino, absl::string_view name);

  // --- Capacity (ops/statfs.cc) ---
  // Capacity and free bytes summed over alive servers; inodes in use.
  absl::StatusOr<StatFsReply> StatFs();

  // --- Orphans (ops/orphan.cc), for the reclaimer ---
  // Orphans due for reclamation, up to `limit`, with inode numbers after
  // `start_after_ino`, in inode order: those whose reclaim_after_ms has
  // come, and those reclaimed when unread (reclaim_when_unread) that no
  // reader holds any more. The latter are claimed first: made due now in a
  // transaction that a reader's open of the orphan conflicts with, so no
  // open registers a hold on what the caller is about to trim (such an
  // open then fails with ENOENT).
  struct DueOrphan {
    uint64_t ino = 0;
    OrphanRecord record;
  };
  absl::StatusOr<std::vector<DueOrphan>> DueOrphans(uint64_t start_after_ino, size_t limit);
  // Forgets orphan `ino`, its inode and any reader holds left on it (their
  // handles outlived the grace) once its chunks are trimmed.
  absl::Status DropOrphan(uint64_t ino);

  const Options& options() const { return options_; }
  // The allocator of inode numbers (shared with the checkpoint store, which
  // creates `latest` symlinks).
  InodeAllocator& inodes() { return inodes_; }

 private:
  // The layout for a new regular file `ino` created in directory `parent`.
  absl::StatusOr<Layout> NewLayout(const InodeRecord& parent, uint64_t ino);
  // DueOrphans' claim of `candidates` (orphans reclaimed when unread, not
  // yet due, in inode order) at `now_ms`: those no reader holds, made due.
  absl::StatusOr<std::vector<DueOrphan>> ClaimUnread(const std::vector<uint64_t>& candidates,
                                                     int64_t now_ms);

  KvStore* const kv_;
  Membership* const membership_;
  Clock* const clock_;
  const Options options_;
  InodeAllocator inodes_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_NAMESPACE_H_
