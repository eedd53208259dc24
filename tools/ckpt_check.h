// Reading a checkpoint's files chunk by chunk, straight from the storage
// servers, for `ckptfs ckpt show` and `ckptfs ckpt verify`.
//
// The files are found by walking the directory on the mount (their inode
// numbers are the service's); each file's size and layout come from the
// metadata service (GetAttr), the servers' addresses from ListServers. Every
// chunk is then READ whole from each server holding a copy of it (one, or
// the layout's replicas: stripe[(i + r) % stripe.size()]); copies that
// differ, or one missing while another has data, make the chunk bad. The
// server
// checks the chunk file's stored CRC32C on the way off its disk (EIO when the
// data or its header fails it), and the payload's CRC32C on the wire is
// checked here (EBADMSG). The CRC32C printed per chunk and per file is
// computed here over the bytes read (a hole reads as zeros), so a file's
// CRC32C equals that of a copy of it anywhere else.
//
// Erasure-coded files (Layout.ec_data > 0, client/fragment_io.h) have
// fragments, not copies: each chunk is decoded from its k+m fragments and
// every fragment is compared with what re-encoding the chunk gives
// (ReadWholeChunkFragments with check_all, over the same connections); the
// chunk is bad, naming the fragment, its server and why, when any fragment
// is missing, unreadable, damaged or of another write, and when fewer than
// k agree. The CRC32Cs are over the decoded bytes, as for copies.
//
// Thread-safety: not thread-safe; one CheckpointReader per thread.
#ifndef CKPTFS_TOOLS_CKPT_CHECK_H_
#define CKPTFS_TOOLS_CKPT_CHECK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/chunk_transport.h"
#include "common/data_connection.h"
#include "proto/meta.pb.h"
#include "tools/meta_probe.h"

namespace ckptfs::tools {

struct ChunkCheck {
  uint32_t index = 0;
  uint32_t server_id = 0;  // of copy 0 (the only one without replicas)
  std::string server;      // host:port, or "" if the id is not registered
  uint64_t length = 0;     // bytes of the file in this chunk
  uint32_t crc32c = 0;     // of those bytes, as read
  // Never written: no chunk file on any copy, and the service does not
  // record it written (meta.proto WrittenChunks); reads as zeros. A chunk
  // it records written with no chunk file anywhere is lost: status says so.
  bool hole = false;
  absl::Status status;  // what failed, naming the copies and servers
};

struct FileCheck {
  std::string path;  // relative to the directory checked
  uint64_t ino = 0;
  uint64_t size = 0;
  uint32_t chunk_size = 0;
  std::vector<ChunkCheck> chunks;
  uint32_t crc32c = 0;  // of the whole file; meaningful when ok()
  absl::Status status;  // the first failure (a chunk's, or the file's)
  bool ok() const { return status.ok(); }
};

// Reads and checks chunk `index` of erasure-coded file `ino` (its bytes in
// the file: `length`) through `transport`, as CheckFile does. `bytes` gets
// the chunk's bytes [0, length) as decoded (zeros for a hole, and past the
// end of a short chunk); the result's crc32c is over them. server_id is
// fragment 1's server; `server` is left empty. `written`: the service
// records the chunk as written, so no fragment anywhere is a lost chunk
// (a DATA_LOSS status), not a hole.
// REQUIRES: IsErasureCoded(layout), client::ValidateLayout(layout).ok(),
// length <= layout.chunk_size().
ChunkCheck CheckErasureCodedChunk(client::ChunkTransport& transport, const meta::Layout& layout,
                                  uint64_t ino, uint32_t index, uint64_t length, std::string& bytes,
                                  bool written = false);

class CheckpointReader {
 public:
  // `probe` is borrowed. `timeout` bounds each connect and chunk READ.
  CheckpointReader(MetaProbe* probe, absl::Duration timeout);

  // Loads the server map (ListServers). Call before CheckFile.
  absl::Status Init();

  // Every regular file under `dir` (recursively, symlinks not followed), in
  // path order. Errors of the walk itself (not a directory, unreadable).
  absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& dir);

  // Reads every chunk of `dir`/`relative`; a failure is recorded in the
  // result (never returned), so the caller reports each file.
  FileCheck CheckFile(const std::string& dir, const std::string& relative);

 private:
  // A connection to server `id`, dialed on first use; nullptr and an error
  // in *error if the server is unknown or unreachable.
  absl::StatusOr<DataConnection*> ConnectionTo(uint32_t id);
  std::string DescribeServer(uint32_t id) const;
  // One copy of a chunk, read whole from server `server_id` into `buffer`
  // (`length` bytes; zeros past what the server had).
  struct CopyRead {
    absl::Status status;       // unreachable, a failed READ (not ENOENT)
    bool unreachable = false;  // status is ConnectionTo's (it names the server)
    bool missing = false;      // the server has no chunk file for it
    uint32_t crc32c = 0;       // of `buffer`, when read
    int copy = 0;
    uint32_t server_id = 0;
  };
  CopyRead ReadCopy(uint64_t ino, uint32_t index, uint64_t length, uint32_t server_id,
                    std::string& buffer);

  MetaProbe* const probe_;
  const absl::Duration timeout_;
  std::map<uint32_t, meta::ServerInfo> servers_;
  std::map<uint32_t, std::unique_ptr<DataConnection>> connections_;
};

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_CKPT_CHECK_H_
