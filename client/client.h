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
// Thread-safety: every method may be called from any thread concurrently.
#ifndef CKPTFS_CLIENT_CLIENT_H_
#define CKPTFS_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/file.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

inline constexpr uint64_t kRootIno = 1;

struct ClientOptions {
  // Metadata service address, "host:port".
  std::string meta_address;
  // Deadline of each metadata RPC.
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Deadline of each chunk request to a storage server.
  absl::Duration data_timeout = absl::Seconds(60);
  // Chunk writes one open file may have in flight at once.
  int max_inflight_chunks_per_file = 8;
  // Chunks read ahead of a sequential reader.
  int readahead_chunks = 4;
  // Threads that carry chunk requests to storage servers.
  int io_threads = 16;
  // Chunk buffers of closed files kept for reuse by later ones (touched
  // memory is much faster to fill than fresh memory); beyond this, freed.
  int64_t idle_buffer_bytes = int64_t{512} << 20;
  // Write-behind memory of all files together: each open file being written
  // always gets one chunk buffer; the further ones it uses to keep chunk
  // writes in flight come from this budget (writers wait when it is spent).
  // Bounds memory when one Client writes thousands of files at once.
  int64_t write_buffer_budget_bytes = int64_t{2} << 30;
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
  // before the service records it, so a later extension reads zeros.
  absl::StatusOr<meta::Attr> SetAttr(const meta::SetAttrRequest& request);
  absl::StatusOr<meta::Attr> Mkdir(uint64_t parent, absl::string_view name, uint32_t mode,
                                   uint32_t uid, uint32_t gid);
  absl::StatusOr<meta::Attr> Symlink(uint64_t parent, absl::string_view name,
                                     absl::string_view target, uint32_t uid, uint32_t gid);
  absl::StatusOr<std::string> ReadLink(uint64_t ino);
  absl::Status Unlink(uint64_t parent, absl::string_view name);
  absl::Status Rmdir(uint64_t parent, absl::string_view name);
  // Atomic; replaces an existing target unless no_replace (then EEXIST).
  absl::Status Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                      absl::string_view new_name, bool no_replace);
  // One page of entries after `start_after` in bytewise name order.
  absl::StatusOr<meta::ReadDirReply> ReadDir(uint64_t ino, absl::string_view start_after,
                                             uint32_t limit);
  absl::Status SetXattr(uint64_t ino, absl::string_view name, absl::string_view value,
                        int flags /* XATTR_CREATE / XATTR_REPLACE / 0 */);
  absl::StatusOr<std::string> GetXattr(uint64_t ino, absl::string_view name);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino);
  absl::Status RemoveXattr(uint64_t ino, absl::string_view name);
  absl::StatusOr<meta::StatFsReply> StatFs();
  // The storage servers the metadata service knows, for tools.
  absl::StatusOr<meta::ListServersReply> ListServers();

  // --- Files ---------------------------------------------------------------
  struct Created {
    std::unique_ptr<File> file;
    meta::Attr attr;
    bool created = false;  // false: an existing file was opened
  };
  // Creates (or with neither O_EXCL nor a new name, opens) `name` in
  // `parent`. `flags` are open(2) flags: the access mode, O_EXCL, O_TRUNC,
  // O_APPEND.
  absl::StatusOr<Created> Create(uint64_t parent, absl::string_view name, uint32_t mode,
                                 uint32_t uid, uint32_t gid, int flags);
  // Opens an existing regular file. O_TRUNC empties it (storage first).
  // The attributes returned are fresh from the service (close-to-open).
  absl::StatusOr<std::unique_ptr<File>> Open(uint64_t ino, int flags);

  // --- Paths, for tools ----------------------------------------------------
  // "/a/b" relative to the root; symlinks are not followed.
  absl::StatusOr<meta::Attr> LookupPath(absl::string_view path);
  // mkdir -p; returns the last directory.
  absl::StatusOr<meta::Attr> MkdirAll(absl::string_view path, uint32_t mode);
  // Opens (creating with `mode` when O_CREAT is in flags) the file at `path`.
  absl::StatusOr<std::unique_ptr<File>> OpenPath(absl::string_view path, int flags,
                                                 uint32_t mode);

 private:
  explicit Client(std::unique_ptr<ClientImpl> impl);
  std::unique_ptr<ClientImpl> impl_;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_CLIENT_H_
