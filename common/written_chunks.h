// Written chunk ranges: which chunk indices of a regular file writes have
// reached, so that a chunk missing from every storage server is told apart
// from a hole. A chunk that was written and is missing is lost data (EIO);
// one never written (a write past the end left a gap, a truncate extended
// the file) reads as zeros.
//
// ChunkRanges is a set of chunk indices kept as sorted, disjoint and
// non-adjacent ranges [first, end): sequential writes make one range. The
// metadata service keeps one per file (meta.proto WrittenChunks) and each
// client keeps one per open file for the chunks its writes reached since
// its last size commit (CommitWriteRequest.written).
//
// Bounded: a file whose ranges would pass kMaxWrittenRanges stops being
// tracked (WrittenChunks.known = false), and its missing chunks read as
// holes again, rather than the record growing without bound.
//
// Thread-safety: none (a value type); callers synchronise.
#ifndef CKPTFS_COMMON_WRITTEN_CHUNKS_H_
#define CKPTFS_COMMON_WRITTEN_CHUNKS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "google/protobuf/repeated_ptr_field.h"
#include "proto/meta.pb.h"

namespace ckptfs {

// The most ranges a file's record keeps (about 12 bytes each stored).
inline constexpr size_t kMaxWrittenRanges = 4096;

class ChunkRanges {
 public:
  ChunkRanges() = default;
  explicit ChunkRanges(const google::protobuf::RepeatedPtrField<meta::ChunkRange>& ranges);

  // Adds chunk indices [first, end); nothing when end <= first.
  void Add(uint64_t first, uint64_t end);
  void Add(const ChunkRanges& other);
  // Removes every index >= end.
  void CutAt(uint64_t end);
  bool Contains(uint64_t index) const;
  bool empty() const { return ranges_.empty(); }
  size_t range_count() const { return ranges_.size(); }
  void Clear() { ranges_.clear(); }

  void AppendTo(google::protobuf::RepeatedPtrField<meta::ChunkRange>* out) const;
  const std::vector<std::pair<uint64_t, uint64_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // sorted [first, end)
};

// The chunks holding bytes [0, size): ceil(size / chunk_size).
uint64_t ChunksCovering(uint64_t size, uint32_t chunk_size);

// --- A file's record (metadata service, and the client's fake of it) ------

// A file that is empty of chunks: created, or truncated to 0.
void ResetWritten(meta::WrittenChunks& written);
// Adds `added`, cut to the chunks below `chunk_limit` (the file's chunk
// count after the commit: a stale index past a truncate is dropped).
// `untracked`: the writer lost count (too many ranges): the file stops
// being tracked. Past kMaxWrittenRanges it stops too. No-op when the file
// is not tracked.
void MergeWritten(meta::WrittenChunks& written,
                  const google::protobuf::RepeatedPtrField<meta::ChunkRange>& added, bool untracked,
                  uint64_t chunk_limit);
// A truncate to `size`: the chunks wholly past it are no longer written; a
// truncate to 0 (re)starts tracking.
void TruncateWritten(meta::WrittenChunks& written, uint64_t size, uint32_t chunk_size);
// Whether chunk `index` is known to have been written (false when the file
// is not tracked).
bool IsWritten(const meta::WrittenChunks& written, uint64_t index);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_WRITTEN_CHUNKS_H_
