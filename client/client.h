// libckptfs: the client library of ckptfs.
//
// A Client talks to the metadata service (gRPC, every call with a deadline)
// and to the storage servers (framed TCP). It serves the FUSE daemon and the
// tools alike: everything a mount does, a program can do without FUSE.
//
// Namespace calls are thin: they validate names (ENAMETOOLONG, EINVAL)
// before any RPC and return the service's errno otherwise. Files are opened
// as File objects (client/file.h) that split data into chunks, keep several
// chunk writes in flight across storage servers and read ahead.
//
// Within one Client, every open of the same inode shares one open-file state,
// so GetAttr reports the exact size of a file that is being written here and
// reads see this client's own writes.
//
// Checkpoints (docs/checkpoints.md): every handle that may
// write is registered with the metadata service as a writer of its file
// until its Flush or Close, so a checkpoint never commits a file still being
// written. The checkpoint calls are methods here and also extended
// attributes (client/checkpoint_xattr_parsing.h) that SetXattr / GetXattr serve, so
// a program and the FUSE mount behave the same.
//
// Thread-safety: every method may be called from any thread concurrently.
#ifndef CKPTFS_CLIENT_CLIENT_H_
#define CKPTFS_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cancellation.h"
#include "client/file.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

inline constexpr uint64_t kRootIno = 1;

// $CKPTFS_CREDENTIAL_FILE, or "" when unset.
std::string DefaultCredentialFile();

struct ClientOptions {
  // Metadata service address, "host:port".
  std::string meta_address;
  // The cluster's credential file (common/credential.h; `ckptfs up` makes
  // <state dir>/credential), presented on every metadata call and data
  // connection. Defaults to $CKPTFS_CREDENTIAL_FILE. Empty: none (a cluster
  // that wants one refuses with EACCES).
  std::string credential_file = DefaultCredentialFile();
  // Deadline of each metadata RPC.
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Deadline of each chunk request to a storage server.
  absl::Duration data_timeout = absl::Seconds(60);
  // How chunk requests reach the storage servers. kUring: one event-loop
  // thread with an io_uring carries them all, many in flight on each of a
  // few connections per server (client/uring_chunk_transport.h). kBlocking:
  // each request in flight holds a blocking connection of its own
  // (client/blocking_chunk_transport.h), kept for comparison and used when
  // io_uring is unavailable.
  enum class DataTransport { kUring, kBlocking };
  DataTransport data_transport = DataTransport::kUring;
  // kUring: TCP connections to each storage server.
  int data_connections_per_server = 2;
  // Chunk writes one open file may have in flight at once (the measured
  // choice: docs/tuning.md).
  int max_inflight_chunks_per_file = 16;
  // Chunks read ahead of a sequential reader: the least memory among the
  // counts that loaded fastest (docs/tuning.md).
  int readahead_chunks = 8;
  // Each further open handle of a file adds a read-ahead window to the
  // file's read cache (still within read_cache_budget_bytes, and at most a
  // quarter of it per file), so that readers of one file at different
  // positions share what was fetched. For readers that share no page cache
  // (the mount with --direct_io_reads); without it the kernel's page cache
  // already serves every rank of a node reading one shard.
  bool read_window_per_handle = false;
  // Read the chunks of storage servers on this host from their files
  // instead of over TCP (client/local_chunk_transport.h): less CPU per GiB
  // loaded and faster loads (docs/tuning.md). Off by default for
  // a library Client, which often stands in for a remote node (tests, the
  // bench's --native ranks); the mount (ckptfs-fuse) turns it on.
  bool local_reads = false;
  // Write whole chunks for storage servers on this host as chunk files
  // under their tmp/, which they adopt, instead of sending them over TCP
  // (client/local_chunk_transport.h). Off by default for a library
  // Client, for the same reason as local_reads; the mount turns it on.
  bool local_writes = false;
  // Threads that carry chunk requests to storage servers.
  int io_threads = 16;
  // Chunk buffers of closed files kept for reuse by later ones (touched
  // memory is much faster to fill than fresh memory); beyond this, freed.
  // The pool only keeps what was in use at once, so this never raises the
  // peak; it keeps a storm's buffers for the next storm (a smaller pool
  // slowed loads: docs/tuning.md).
  int64_t idle_buffer_bytes = int64_t{4} << 30;
  // Write-behind memory of all files together: each open file being written
  // always gets one chunk buffer; the further ones it uses to keep chunk
  // writes in flight come from this budget (writers wait when it is spent).
  // Bounds memory when one Client writes thousands of files at once.
  int64_t write_buffer_budget_bytes = int64_t{2} << 30;
  // Read-cache memory of all files together (fetched and read-ahead
  // chunks, client/read_cache.h). When it is spent, files read ahead no
  // further and readers fetch what they ask for without caching it, one
  // chunk buffer per read in flight; nothing fails. 0 (or less): no read
  // cache at all.
  int64_t read_cache_budget_bytes = int64_t{4} << 30;
  // CommitCheckpoint: how long one long poll may wait in the service before
  // it answers PENDING and is sent again.
  absl::Duration commit_poll = absl::Seconds(10);
  // CommitCheckpoint: while the service cannot be reached (a restart), keep
  // retrying until the checkpoint's timeout plus this much has passed since
  // the first try, then fail with ETIMEDOUT.
  absl::Duration commit_unreachable_slack = absl::Seconds(60);
};

class ClientImpl;
class MetaClient;
class ChunkTransport;

class Client {
 public:
  // Connects to the metadata service and learns the storage servers.
  // Fails with a message naming the address when the service is unreachable
  // (after retrying for min(rpc_timeout, 10 s), so a service still starting
  // up is waited for).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  // A Client over the given metadata client and chunk transport (tests use
  // the fakes of client/testing/). options.meta_address is not used.
  static std::unique_ptr<Client> CreateWithServices(const ClientOptions& options,
                                                    std::unique_ptr<MetaClient> meta,
                                                    std::unique_ptr<ChunkTransport> transport);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // REQUIRES: every File of this client is closed or destroyed first.
  ~Client();

  // --- Namespace -----------------------------------------------------------
  absl::StatusOr<meta::Attr> Lookup(uint64_t parent, absl::string_view name);
  // The size of a file open for writing in this client includes bytes not
  // yet flushed.
  absl::StatusOr<meta::Attr> GetAttr(uint64_t ino);
  // SET_SIZE trims the data beyond the new size on the storage servers
  // before the service records it, so a later extension reads zeros; it
  // registers a writer meanwhile (EROFS in a committed checkpoint, before
  // anything is trimmed).
  absl::StatusOr<meta::Attr> SetAttr(const meta::SetAttrRequest& request);
  absl::StatusOr<meta::Attr> Mkdir(uint64_t parent, absl::string_view name, uint32_t mode,
                                   uint32_t uid, uint32_t gid);
  absl::StatusOr<meta::Attr> Symlink(uint64_t parent, absl::string_view name,
                                     absl::string_view target, uint32_t uid, uint32_t gid);
  // A FIFO, socket or device node: `mode` holds its type bits (S_IFIFO,
  // S_IFSOCK, S_IFCHR, S_IFBLK; EINVAL for others) and permission bits;
  // `rdev` is kept for device nodes.
  absl::StatusOr<meta::Attr> Mknod(uint64_t parent, absl::string_view name, uint32_t mode,
                                   uint64_t rdev, uint32_t uid, uint32_t gid);
  // A new name new_parent/new_name for inode `ino` (a hard link); its
  // attributes with nlink counted. The service's rules: meta.proto LinkRequest.
  absl::StatusOr<meta::Attr> Link(uint64_t ino, uint64_t new_parent, absl::string_view new_name);
  absl::StatusOr<std::string> ReadLink(uint64_t ino);
  absl::Status Unlink(uint64_t parent, absl::string_view name);
  absl::Status Rmdir(uint64_t parent, absl::string_view name);
  // Atomic; replaces an existing target unless no_replace (then EEXIST).
  absl::Status Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                      absl::string_view new_name, bool no_replace);
  // One page of entries after `start_after` in bytewise name order.
  absl::StatusOr<meta::ReadDirReply> ReadDir(uint64_t ino, absl::string_view start_after,
                                             uint32_t limit);
  // The checkpoint names of client/checkpoint_xattr_parsing.h are served here:
  // setting user.ckptfs.ranks declares, user.ckptfs.commit commits (blocks
  // like CommitCheckpoint, `cancel` as there), user.ckptfs.remove removes;
  // getting user.ckptfs.{state,ranks,info,checkpoints,latest} formats the
  // service's answer (ENODATA where there is none: not a checkpoint, no
  // checkpoints, no latest), and getting user.ckptfs.commit.R commits rank
  // R like setting user.ckptfs.commit (value "committed"; `cancel` as in
  // CommitCheckpoint). A value or rank that does not parse: EINVAL, no RPC.
  // Other names are stored by the service (which refuses further
  // user.ckptfs.* names with EINVAL).
  absl::Status SetXattr(uint64_t ino, absl::string_view name, absl::string_view value,
                        int flags /* XATTR_CREATE / XATTR_REPLACE / 0 */,
                        Cancellation* cancel = nullptr);
  absl::StatusOr<std::string> GetXattr(uint64_t ino, absl::string_view name,
                                       Cancellation* cancel = nullptr);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino);
  absl::Status RemoveXattr(uint64_t ino, absl::string_view name);
  absl::StatusOr<meta::StatFsReply> StatFs();
  // The storage servers the metadata service knows, for tools.
  absl::StatusOr<meta::ListServersReply> ListServers();

  // --- Checkpoint transactions ---------------------------------------------
  // Declares directory `dir` a checkpoint of `ranks` ranks (1..1048576).
  // timeout_s 0: the directory's or its parent's user.ckptfs.commit_timeout_s,
  // else the service's default. Same N again: OK, nothing changes. EINVAL:
  // another N, the root, inside another checkpoint, bad N.
  absl::StatusOr<meta::CheckpointInfo> DeclareCheckpoint(uint64_t dir, uint32_t ranks,
                                                         uint32_t timeout_s = 0);
  // Rank `rank` commits `dir` and waits until all ranks did: returns the
  // COMMITTED info, or the abort's errno (ETIMEDOUT, EBUSY, EIO) with its
  // reason. Idempotent: calling again waits for the same outcome. While the
  // service cannot be reached it retries (backoff 100 ms..2 s) until the
  // checkpoint's timeout plus options.commit_unreachable_slack have passed
  // since this call began, then ETIMEDOUT. `cancel` (may be null): EINTR
  // soon after it is cancelled (the rank may still be counted as arrived).
  absl::StatusOr<meta::CheckpointInfo> CommitCheckpoint(uint64_t dir, uint32_t rank,
                                                        Cancellation* cancel = nullptr);
  // EINVAL if `dir` is not a checkpoint.
  absl::StatusOr<meta::CheckpointInfo> GetCheckpoint(uint64_t dir);
  // The checkpoints that are children of `run_dir` (every state), by name,
  // and the latest committed one.
  absl::StatusOr<meta::ListCheckpointsReply> ListCheckpoints(uint64_t run_dir);
  // Removes checkpoint `name` of `run_dir` (any state) with all its files.
  // With `expected`: only while the entry is still that checkpoint (inode)
  // in that state, ESTALE otherwise (what `ckpt gc` listed, never a newer
  // checkpoint that took the name meanwhile).
  struct ExpectedCheckpoint {
    uint64_t ino = 0;
    meta::CheckpointState state = meta::CHECKPOINT_STATE_UNSPECIFIED;
  };
  absl::Status RemoveCheckpoint(uint64_t run_dir, absl::string_view name,
                                std::optional<ExpectedCheckpoint> expected = std::nullopt);

  // --- Files ---------------------------------------------------------------
  struct Created {
    std::unique_ptr<File> file;
    meta::Attr attr;
    bool created = false;  // false: an existing file was opened
  };
  // Creates (or with neither O_EXCL nor a new name, opens) `name` in
  // `parent`. `flags` are open(2) flags: the access mode, O_EXCL, O_TRUNC,
  // O_APPEND. A handle that may write registers as a writer of the file
  // (EROFS inside a committed or aborted checkpoint).
  absl::StatusOr<Created> Create(uint64_t parent, absl::string_view name, uint32_t mode,
                                 uint32_t uid, uint32_t gid, int flags);
  // Opens an existing regular file. O_TRUNC empties it (storage first, once
  // the service has agreed to the open). A handle that may write registers
  // as a writer. The attributes returned are fresh from the service
  // (close-to-open).
  absl::StatusOr<std::unique_ptr<File>> Open(uint64_t ino, int flags);

  // --- Paths, for tools ----------------------------------------------------
  // "/a/b" relative to the root; symlinks are not followed. A directory of
  // the path removed during the walk: walked again once, then ENOENT.
  absl::StatusOr<meta::Attr> LookupPath(absl::string_view path);
  // mkdir -p; returns the last directory.
  absl::StatusOr<meta::Attr> MkdirAll(absl::string_view path, uint32_t mode);
  // Opens (creating with `mode` when O_CREAT is in flags) the file at `path`.
  absl::StatusOr<std::unique_ptr<File>> OpenPath(absl::string_view path, int flags, uint32_t mode);

 private:
  explicit Client(std::unique_ptr<ClientImpl> impl);
  // One walk of the path calls above (client_paths.cc); ESTALE passes out.
  absl::StatusOr<meta::Attr> LookupPathOnce(absl::string_view path);
  absl::StatusOr<meta::Attr> MkdirAllOnce(absl::string_view path, uint32_t mode);
  absl::StatusOr<std::unique_ptr<File>> OpenPathOnce(absl::string_view path, int flags,
                                                     uint32_t mode);
  // SetXattr / GetXattr of a checkpoint name (client_checkpoints.cc).
  absl::Status SetCheckpointXattr(uint64_t ino, absl::string_view name, absl::string_view value,
                                  Cancellation* cancel);
  absl::StatusOr<std::string> GetCheckpointXattr(uint64_t ino, absl::string_view name,
                                                 Cancellation* cancel);

  std::unique_ptr<ClientImpl> impl_;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_CLIENT_H_
