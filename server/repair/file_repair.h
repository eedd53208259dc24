// FileRepairer: restores the copies (or erasure-coded fragments) of one
// file's chunks.
//
// Given a file's attributes (size, layout) and the storage servers (alive
// flag, last heartbeat), Repair does two things:
//  - A stripe server dead (not alive) for at least `move_after` is replaced:
//    a live server outside the stripe (the one with the most free bytes)
//    gets, by a replace WRITE, every chunk that had a copy on the dead one,
//    read from another copy; then the service moves the stripe entry
//    (RepairMeta::MoveStripeServer) once a SYNC made them durable there:
//    until the move the dead server's copies are what the stripe names, and
//    after it the spare's may be the only ones. ESTALE (someone moved it
//    first) re-reads the attributes. With one copy per chunk, or no spare
//    server, the file is unrepairable.
//  - With two or more copies per chunk, every chunk of the file is READ
//    whole from each copy on a live server (the server checks its CRC32C:
//    EIO for a corrupt copy; a copy its scrubber set aside reads ENOENT). A
//    missing copy is filled from a good one (ChunkTransport::FillChunk, only
//    if still absent: a writer's bytes stored meanwhile win); a corrupt one
//    is rewritten (replace WRITE). Each server written is synced once the
//    file's chunks are checked, and its copies count as rebuilt only then (a
//    failed sync is a problem, and the next pass looks again). Good copies
//    that differ are left alone (a
//    write that failed on one copy, and its writer was told) and reported; a
//    chunk missing everywhere is a hole.
// Erasure-coded files (client/fragment_io.h: k data + m parity fragments
// per chunk, fragment r where copy r would be) are checked per chunk by
// decoding it from the live servers' fragments and re-encoding every
// fragment (ReadWholeChunkFragments, check_all); a dead server's fragment is
// just one that failed. A fragment on a live server that is missing is
// filled (FillChunk, only if still absent) with exactly what encoding the
// chunk gives (EncodeFragment); a corrupt one (the server's CRC32C check, a
// bad header, bytes that differ) is rewritten; one holding another version
// (write id) is rewritten only when the file was last written 60 s or more
// ago and the chunk reads the same a second time, else reported as being
// written and left (file_repair.cc, kQuietBeforeRewriteMs, says why and
// what this does not see). Fewer than k agreeing fragments: unrepairable.
// A dead server is moved off as for copies, each of its fragments decoded
// from the others and written onto the spare. Fragments count as copies in
// the result (copies_rebuilt, copies_moved).
// A corrupt copy is rewritten without a condition: a writer replacing that
// chunk between the READs and the rewrite loses to the repair (the window is
// one chunk's READ and WRITE). Copies are compared over the chunk's bytes within the file's size (a
// short copy reads as zeros past its end); the bytes copied are all that
// the good copy holds.
//
// Thread-safety: one Repair at a time per FileRepairer; several
// FileRepairers may share the transport and the RepairMeta.
#ifndef CKPTFS_SERVER_REPAIR_FILE_REPAIR_H_
#define CKPTFS_SERVER_REPAIR_FILE_REPAIR_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/chunk_transport.h"
#include "proto/meta.pb.h"
#include "server/repair/repair_meta.h"

namespace ckptfs::repair {

// What the repair of one file did; a pass adds these up.
struct FileRepairResult {
  uint64_t chunks_checked = 0;  // chunks whose copies were compared
  uint64_t copies_rebuilt = 0;  // missing or corrupt copies written again, and synced
  uint64_t copies_moved = 0;    // copies written onto a replacement server, and synced
  uint64_t bytes_written = 0;
  bool unrepairable = false;  // something is still wrong (see problems)
  // For people, one line each, naming the file, chunk and servers.
  std::vector<std::string> problems;
};

class FileRepairer {
 public:
  // `meta` and `transport` are borrowed and must outlive this.
  FileRepairer(RepairMeta* meta, client::ChunkTransport* transport, absl::Duration move_after);

  // Repairs file `attr` (a regular file; `path` names it in messages) given
  // the storage servers as ListServers reported them at `now_ms` (the
  // service's wall clock, against which last_heartbeat_ms is measured).
  // Never fails: what could not be done is in the result.
  FileRepairResult Repair(const std::string& path, meta::Attr attr,
                          const std::vector<meta::ServerInfo>& servers, int64_t now_ms);

 private:
  // One copy of a chunk as READ from its server.
  struct Copy {
    uint32_t server_id = 0;
    enum class State { kGood, kMissing, kCorrupt, kFailed } state = State::kFailed;
    std::string bytes;  // kGood: what the server holds (up to chunk_size)
    std::string error;  // kFailed / kCorrupt: the transport's message
  };

  Copy ReadCopy(uint32_t server_id, uint64_t ino, uint64_t chunk_index, uint32_t chunk_size);
  // Copies `dead`'s chunks of the file onto `spare`, then moves the stripe
  // entry; kMoved updates `attr`; kFailed records a problem.
  enum class MoveOutcome { kMoved, kStale, kFailed };
  // After the chunks are on `spare`: moves the stripe entry (kMoved, `attr`
  // updated), or kStale on ESTALE, or kFailed through `fail(problem)`.
  template <typename Fail>
  MoveOutcome FinishMove(const std::string& path, meta::Attr& attr, uint32_t dead, uint32_t spare,
                         Fail& fail);
  MoveOutcome MoveOff(const std::string& path, meta::Attr& attr, uint32_t dead, uint32_t spare,
                      FileRepairResult& result);
  // The same for an erasure-coded file: each fragment `dead` holds is
  // decoded from the others and written onto `spare`.
  MoveOutcome MoveFragmentsOff(const std::string& path, meta::Attr& attr, uint32_t dead,
                               uint32_t spare, FileRepairResult& result);
  void CheckChunk(const std::string& path, const meta::Attr& attr, uint64_t chunk_index,
                  FileRepairResult& result);
  // CheckChunk for an erasure-coded file; `now_ms` as for Repair.
  void CheckFragments(const std::string& path, const meta::Attr& attr, uint64_t chunk_index,
                      int64_t now_ms, FileRepairResult& result);
  // Copy `bytes` bytes long was written again on `server_id`: counted in
  // `result` once SyncRebuilt made it durable.
  void Rebuilt(uint32_t server_id, size_t bytes);
  // Syncs inode `ino` on every server Rebuilt names, and counts what each
  // sync made durable; a failed sync is a problem.
  void SyncRebuilt(const std::string& path, uint64_t ino, FileRepairResult& result);

  RepairMeta* const meta_;
  client::ChunkTransport* const transport_;
  const absl::Duration move_after_;
  std::vector<meta::ServerInfo> servers_;  // of the current Repair
  // Copies the current Repair wrote again, by server, not yet synced.
  struct Unsynced {
    uint64_t copies = 0;
    uint64_t bytes = 0;
  };
  std::map<uint32_t, Unsynced> rebuilt_;
};

}  // namespace ckptfs::repair

#endif  // CKPTFS_SERVER_REPAIR_FILE_REPAIR_H_
