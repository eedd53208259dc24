// Chunk I/O for erasure-coded files (Layout.ec_data = k > 0,
// Layout.ec_parity = m): each chunk is stored as k data fragments and m
// parity fragments (common/erasure_code.h), fragment r on the server where
// copy r of a replicated chunk would be (common/placement.h), so any k of
// the k+m servers give back the chunk.
//
// Fragment geometry. With F = ceil(chunk_size / k), data fragment j holds
// the chunk's bytes [j*F, (j+1)*F); a chunk of L bytes gives data fragment j
// min(F, max(0, L - j*F)) bytes and every parity fragment P = min(F, L)
// bytes (the parity of the data fragments zero-padded to P). Each fragment
// is stored on its server as one chunk (same ino and index on every
// server) of a 16-byte header followed by those bytes:
//   u32 magic "CKE1" | u32 L | u64 write id      (little-endian)
// The write id is random per write of the chunk: a write that reached only
// some fragments (the writer was told) leaves fragments of two versions, and
// a decode uses only fragments that agree, never a mix (which would give
// bytes that neither version held).
//
// Writes. Every write stores all k+m fragments anew (replace), and is done
// when all answered: OK only if every fragment was stored (an acknowledged
// write survives any m lost servers). A write that covers the whole chunk,
// or all of it up to the end of the file as its writer knows it (the last
// chunk of a file written front to back), is encoded from its bytes; any
// other (an append to a partial chunk, a random write) reads the chunk
// first (decoding if needed), merges, and writes it whole:
// read-modify-write, serialized per chunk by the caller (OpenFileState).
// Two clients writing one chunk of an erasure-coded file at once can lose
// one's bytes (checkpoint files have one writer each): unlike a storage
// server's merge of a copy, a read-modify-write is not atomic, and a writer
// that has not seen another's bytes past its end of file encodes without
// them.
// Known limit: fragments are replaced in place, so a client that dies (or
// a write that fails) after more than m and fewer than k of the n
// replacements of a chunk that already held data leaves neither version
// decodable: that chunk then reads EIO. A checkpoint writes each chunk of a
// new file once (nothing older to lose, and a failed write is reported to
// its writer); rewriting or appending to a file in place is where this
// bites. Keeping the old version until all n are stored (a per-write-id
// fragment name) is the fix.
//
// Reads. The headers of the k data fragments are read first; when they all
// name one write (id and length), the data fragments holding the bytes
// asked for are read directly (no decode), each checked to hold what that
// length gives it. If a header disagrees (a rewrite or a truncate's
// re-encode that reached only some fragments), or a fragment fails, is
// missing or holds another length, every fragment is read whole, the largest group of fragments
// with one write id (and the stored length that id's chunk length gives each fragment) is taken (at
// least k, else EIO), and the missing data fragments are decoded. No
// fragment readable and at least k of them absent (ENOENT) is a hole: a
// chunk that was written has lost at most m, so a hole still reads as
// zeros with up to m servers down.
//
// Truncate. Storage servers cut chunks by byte offset, which does not fit
// fragments: TrimStripe (stripe_ops.h) trims whole chunks on the servers
// and CutChunkFragments re-encodes the chunk the new size falls in.
//
// Thread-safety: every function may be called from any thread;
// ReadChunkFragments and the tasks WriteChunkFragments submits never wait
// for other IoExecutor tasks.
#ifndef CKPTFS_CLIENT_FRAGMENT_IO_H_
#define CKPTFS_CLIENT_FRAGMENT_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/chunk_transport.h"
#include "client/io_executor.h"
#include "client/replica_io.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

inline constexpr size_t kFragmentHeaderSize = 16;
inline constexpr uint32_t kFragmentMagic = 0x31454b43;  // "CKE1" little-endian

// F: the bytes of a chunk each data fragment holds. REQUIRES: IsErasureCoded(layout).
uint32_t FragmentSize(const meta::Layout& layout);

// Writes `write` to the k+m fragments of its chunk (see the top of this
// file) and calls `done` exactly once, from an IoExecutor thread: OK if
// every fragment was stored, else the first failure, naming the fragment
// and its server. Returns at once.
// REQUIRES: IsErasureCoded(layout), ValidateLayout(layout).ok(); `transport`,
// `executor` and write.data outlive the call of `done`; no other write of
// the chunk by this caller is in flight.
void WriteChunkFragments(ChunkTransport& transport, IoExecutor& executor,
                         const meta::Layout& layout, const ChunkWrite& write,
                         absl::AnyInvocable<void(absl::Status) &&> done);

// Reads up to `length` bytes at `offset` of chunk `chunk_index` into `out`,
// as ReadChunkCopy does for copies: returns how many there were (bytes of
// `out` up to `length` past them are zeros), ENOENT for a hole (see the top
// of this file), EIO when fewer than k fragments agree. `failed`
// (may be null) learns servers whose reads failed.
// REQUIRES: IsErasureCoded(layout), ValidateLayout(layout).ok().
absl::StatusOr<size_t> ReadChunkFragments(ChunkTransport& transport, FailedServers* failed,
                                          const meta::Layout& layout, uint64_t ino,
                                          uint64_t chunk_index, uint32_t offset, char* out,
                                          size_t length);

// Cuts the chunk to `keep` bytes (re-encoding it) if it holds more. Blocks.
// REQUIRES: as ReadChunkFragments; no write of the chunk in flight.
absl::Status CutChunkFragments(ChunkTransport& transport, const meta::Layout& layout, uint64_t ino,
                               uint64_t chunk_index, uint32_t keep);

// A whole erasure-coded chunk as read back from its fragments (for tools
// that verify and repair, and for read-modify-write).
struct DecodedChunk {
  uint32_t length = 0;      // L
  uint64_t write_id = 0;    // of the fragments used
  std::vector<char> bytes;  // k * F bytes: the chunk, zeros past `length`
  // Per fragment r in [0, k+m): whether it was read, agrees with the
  // version decoded, and its stored bytes are exactly what encoding the
  // chunk gives (false for missing, failed, other-version or damaged ones).
  std::vector<bool> fragment_good;
  std::vector<absl::Status> fragment_status;  // why not, per fragment (OK when good)
};

// Reads every fragment of the chunk and decodes it. ENOENT for a hole; EIO
// when fewer than k agree. With `check_all`, also re-encodes
// the chunk and compares every fragment that was read with what it should
// hold (fragment_good), so that a tool finds a stale or damaged fragment.
absl::StatusOr<DecodedChunk> ReadWholeChunkFragments(ChunkTransport& transport,
                                                     FailedServers* failed,
                                                     const meta::Layout& layout, uint64_t ino,
                                                     uint64_t chunk_index, bool check_all);

// The stored bytes (header and payload) of fragment `r` of `chunk`, as a
// write of it would store them (for repair: rewrite one fragment).
// REQUIRES: r in [0, k+m); chunk.bytes.size() == k * FragmentSize(layout).
std::vector<char> EncodeFragment(const meta::Layout& layout, const DecodedChunk& chunk, int r);

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_FRAGMENT_IO_H_
