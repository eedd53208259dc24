// See fragment_io.h.
#include "client/fragment_io.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "absl/base/internal/endian.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/io_errors.h"
#include "common/erasure_code.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/placement.h"

namespace ckptfs::client {
namespace {

struct Geometry {
  int k = 0;
  int m = 0;
  int n = 0;       // k + m
  uint32_t F = 0;  // bytes of the chunk per data fragment
};

Geometry GeometryOf(const meta::Layout& layout) {
  Geometry g;
  g.k = static_cast<int>(layout.ec_data());
  g.m = static_cast<int>(layout.ec_parity());
  g.n = g.k + g.m;
  g.F = FragmentSize(layout);
  return g;
}

// One ErasureCode per k+m, made on first use and kept.
const ErasureCode& CodeFor(int k, int m) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* codes = new std::map<std::pair<int, int>, std::unique_ptr<ErasureCode>>();
  absl::MutexLock lock(&mu);
  std::unique_ptr<ErasureCode>& code = (*codes)[{k, m}];
  if (code == nullptr) {
    // ValidateLayout admitted k and m, so Create cannot fail.
    code = std::make_unique<ErasureCode>(*ErasureCode::Create(k, m));
  }
  return *code;
}

uint64_t NewWriteId() {
  thread_local absl::BitGen gen;
  uint64_t id = 0;
  while (id == 0) id = absl::Uniform<uint64_t>(gen);
  return id;
}

struct FragmentHeader {
  uint32_t length = 0;  // L
  uint64_t write_id = 0;
};

void PutHeader(char* at, const FragmentHeader& h) {
  absl::little_endian::Store32(at, kFragmentMagic);
  absl::little_endian::Store32(at + 4, h.length);
  absl::little_endian::Store64(at + 8, h.write_id);
}

bool GetHeader(const char* at, size_t size, FragmentHeader* h) {
  if (size < kFragmentHeaderSize || absl::little_endian::Load32(at) != kFragmentMagic) {
    return false;
  }
  h->length = absl::little_endian::Load32(at + 4);
  h->write_id = absl::little_endian::Load64(at + 8);
  return true;
}

std::string PieceName(int r, const Geometry& g, uint32_t server_id) {
  return absl::StrCat(r < g.k ? "data" : "parity", " fragment ", r + 1, " of ", g.n,
                      " (storage server ", server_id, ")");
}

// The k+m fragments of a chunk, as stored: header, then bytes.
struct Fragments {
  std::vector<std::unique_ptr<char[]>> buffers;
  std::vector<size_t> sizes;  // stored bytes of each, header included
};

// Encodes chunk bytes image[0, length) (image holds at least k * F bytes
// when length > (k - 1) * F... any bytes past `length` are ignored).
Fragments Encode(const Geometry& g, const char* image, uint32_t length, uint64_t write_id) {
  const uint32_t P = std::min(g.F, length);
  Fragments out;
  std::vector<const unsigned char*> data;
  std::vector<unsigned char*> parity;
  for (int r = 0; r < g.n; ++r) {
    std::unique_ptr<char[]> buffer(new char[kFragmentHeaderSize + std::max<uint32_t>(P, 1)]);
    PutHeader(buffer.get(), {length, write_id});
    char* bytes = buffer.get() + kFragmentHeaderSize;
    size_t stored = P;
    if (r < g.k) {
      const uint64_t start = uint64_t{g.F} * static_cast<uint64_t>(r);
      stored = length > start ? std::min<uint64_t>(g.F, length - start) : 0;
      if (stored > 0) std::memcpy(bytes, image + start, stored);
      std::memset(bytes + stored, 0, P - stored);  // the encoder reads P bytes of each
      data.push_back(reinterpret_cast<const unsigned char*>(bytes));
    } else {
      parity.push_back(reinterpret_cast<unsigned char*>(bytes));
    }
    out.sizes.push_back(kFragmentHeaderSize + stored);
    out.buffers.push_back(std::move(buffer));
  }
  CodeFor(g.k, g.m).Encode(P, data.data(), parity.data());
  return out;
}

// What the fragments of one chunk write share: the last to answer reports.
struct FragmentsInFlight {
  FragmentsInFlight(ChunkTransport& transport, Geometry g, uint64_t ino, uint64_t chunk_index,
                    std::vector<uint32_t> servers, Fragments fragments,
                    absl::AnyInvocable<void(absl::Status) &&> done)
      : transport(transport),
        g(g),
        ino(ino),
        chunk_index(chunk_index),
        servers(std::move(servers)),
        fragments(std::move(fragments)),
        remaining(g.n),
        done(std::move(done)) {}

  void Send(int r) {
    const size_t i = static_cast<size_t>(r);
    absl::Status status = transport.WriteChunk(servers[i], ino, chunk_index, 0,
                                               fragments.buffers[i].get(), fragments.sizes[i],
                                               /*replace=*/true);
    if (!status.ok()) {
      absl::MutexLock lock(&mu);
      if (first_error.ok()) first_error = AnnotateError(status, PieceName(r, g, servers[i]));
    }
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    absl::Status result;
    {
      absl::MutexLock lock(&mu);
      result = first_error;
    }
    std::move(done)(std::move(result));
  }

  ChunkTransport& transport;
  const Geometry g;
  const uint64_t ino;
  const uint64_t chunk_index;
  const std::vector<uint32_t> servers;
  const Fragments fragments;
  std::atomic<int> remaining;
  absl::AnyInvocable<void(absl::Status) &&> done;
  absl::Mutex mu;
  absl::Status first_error ABSL_GUARDED_BY(mu);
};

// The fragments a write stores: encoded from the write itself when it
// covers the chunk as far as its writer knows (one writer per file: see
// fragment_io.h), else from the chunk read back with the write merged in.
absl::StatusOr<Fragments> FragmentsOfWrite(ChunkTransport& transport, const meta::Layout& layout,
                                           const Geometry& g, const ChunkWrite& write) {
  if (write.replace || write.covers_known_end) {
    return Encode(g, write.data, static_cast<uint32_t>(write.length), NewWriteId());
  }
  const size_t capacity = size_t{g.F} * static_cast<size_t>(g.k);
  if (write.offset + write.length > capacity) {
    return ErrnoStatus(
        EINVAL, absl::StrCat("write of ", write.length, " bytes at offset ", write.offset,
                             " of chunk ", write.chunk_index, " exceeds its ", capacity, " bytes"));
  }
  absl::StatusOr<DecodedChunk> old = ReadWholeChunkFragments(
      transport, nullptr, layout, write.ino, write.chunk_index, /*check_all=*/false);
  std::vector<char> image;
  uint32_t length = 0;
  if (old.ok()) {
    image = std::move(old->bytes);
    length = old->length;
  } else if (ErrnoFromStatus(old.status()) == ENOENT) {
    image.assign(capacity, 0);  // a hole: zeros
  } else {
    return AnnotateError(old.status(), absl::StrCat("read of chunk ", write.chunk_index,
                                                    " to merge a write at offset ", write.offset));
  }
  if (write.length > 0) std::memcpy(image.data() + write.offset, write.data, write.length);
  length = std::max<uint32_t>(length, static_cast<uint32_t>(write.offset + write.length));
  return Encode(g, image.data(), length, NewWriteId());
}

}  // namespace

uint32_t FragmentSize(const meta::Layout& layout) {
  const uint32_t k = layout.ec_data();
  return (layout.chunk_size() + k - 1) / k;
}

void WriteChunkFragments(ChunkTransport& transport, IoExecutor& executor,
                         const meta::Layout& layout, const ChunkWrite& write,
                         absl::AnyInvocable<void(absl::Status) &&> done) {
  // Encoding (and a read-modify-write's reads) run as a task, off the
  // caller's thread; the fragments then travel as tasks of their own.
  executor.Submit([&transport, &executor, layout, write, done = std::move(done)]() mutable {
    const Geometry g = GeometryOf(layout);
    absl::StatusOr<Fragments> fragments = FragmentsOfWrite(transport, layout, g, write);
    if (!fragments.ok()) {
      std::move(done)(fragments.status());
      return;
    }
    auto shared = std::make_shared<FragmentsInFlight>(transport, g, write.ino, write.chunk_index,
                                                      ReplicaServers(layout, write.chunk_index),
                                                      *std::move(fragments), std::move(done));
    for (int r = 0; r < g.n; ++r) executor.Submit([shared, r] { shared->Send(r); });
  });
}

absl::StatusOr<DecodedChunk> ReadWholeChunkFragments(ChunkTransport& transport,
                                                     FailedServers* failed,
                                                     const meta::Layout& layout, uint64_t ino,
                                                     uint64_t chunk_index, bool check_all) {
  const Geometry g = GeometryOf(layout);
  const std::vector<uint32_t> servers = ReplicaServers(layout, chunk_index);
  const size_t whole = kFragmentHeaderSize + g.F;
  std::vector<std::unique_ptr<char[]>> buffers;
  std::vector<size_t> got(static_cast<size_t>(g.n), 0);
  std::vector<FragmentHeader> headers(static_cast<size_t>(g.n));
  DecodedChunk chunk;
  chunk.fragment_good.assign(static_cast<size_t>(g.n), false);
  chunk.fragment_status.assign(static_cast<size_t>(g.n), absl::OkStatus());
  std::map<std::pair<uint64_t, uint32_t>, std::vector<int>> versions;  // (id, L) -> fragments
  int missing = 0;
  absl::Status failure;
  for (int r = 0; r < g.n; ++r) {
    const size_t i = static_cast<size_t>(r);
    buffers.emplace_back(new char[whole]);
    absl::StatusOr<size_t> read =
        transport.ReadChunk(servers[i], ino, chunk_index, 0, buffers[i].get(), whole);
    if (failed != nullptr) {
      if (read.ok() || ErrnoFromStatus(read.status()) == ENOENT) {
        failed->NoteAnswered(servers[i]);
      } else {
        failed->NoteFailed(servers[i]);
      }
    }
    if (!read.ok()) {
      chunk.fragment_status[i] = AnnotateError(read.status(), PieceName(r, g, servers[i]));
      if (ErrnoFromStatus(read.status()) == ENOENT) {
        ++missing;
      } else if (failure.ok()) {
        failure = chunk.fragment_status[i];
      }
      continue;
    }
    got[i] = std::min(*read, whole);
    if (!GetHeader(buffers[i].get(), got[i], &headers[i])) {
      chunk.fragment_status[i] = ErrnoStatus(
          EIO, absl::StrCat(PieceName(r, g, servers[i]), " has no valid fragment header"));
      if (failure.ok()) failure = chunk.fragment_status[i];
      continue;
    }
    // The stored bytes must be exactly what a write of a chunk of that
    // length stores in this fragment: a shorter one would be zero-padded
    // into the decode, a longer one is not ours.
    const uint32_t L = headers[i].length;
    const uint64_t start = uint64_t{g.F} * static_cast<uint64_t>(r);
    const uint64_t expected =
        r < g.k ? (L > start ? std::min<uint64_t>(g.F, L - start) : 0) : std::min(g.F, L);
    if (got[i] != kFragmentHeaderSize + expected) {
      chunk.fragment_status[i] = ErrnoStatus(
          EIO, absl::StrCat(PieceName(r, g, servers[i]), " holds ", got[i] - kFragmentHeaderSize,
                            " bytes; a chunk of ", L, " bytes gives it ", expected));
      if (failure.ok()) failure = chunk.fragment_status[i];
      continue;
    }
    versions[{headers[i].write_id, headers[i].length}].push_back(r);
  }
  const std::string chunk_name = absl::StrCat("chunk ", chunk_index, " of inode ", ino);
  if (versions.empty()) {
    // At least k fragments absent: a chunk that was written would have
    // lost more than m of them at once, beyond what the code survives, so
    // it is a hole (never written), read as zeros with up to m servers down.
    if (missing >= g.k) {
      return ErrnoStatus(ENOENT,
                         absl::StrCat(chunk_name, " is on none of its ", g.n, " fragment servers"));
    }
    return AnnotateError(failure, absl::StrCat("no fragment of ", chunk_name, " could be read"));
  }
  const std::vector<int>* group = nullptr;
  for (const auto& [version, members] : versions) {
    if (group == nullptr || members.size() > group->size()) group = &members;
  }
  if (static_cast<int>(group->size()) < g.k) {
    return ErrnoStatus(
        EIO,
        absl::StrCat(chunk_name, ": only ", group->size(), " of its ", g.n, " fragments agree (",
                     g.k, " needed; ", missing, " missing",
                     failure.ok() ? std::string() : absl::StrCat(", ", failure.message()), ")"));
  }
  const FragmentHeader& version = headers[static_cast<size_t>(group->front())];
  chunk.length = version.length;
  chunk.write_id = version.write_id;
  const uint32_t P = std::min(g.F, chunk.length);
  chunk.bytes.assign(size_t{g.F} * static_cast<size_t>(g.k), 0);
  std::vector<bool> in_group(static_cast<size_t>(g.n), false);
  for (int r : *group) in_group[static_cast<size_t>(r)] = true;
  // Every fragment of the group as the encoder saw it: P bytes, zero-padded.
  for (int r : *group) {
    const size_t i = static_cast<size_t>(r);
    const size_t payload = got[i] - kFragmentHeaderSize;
    if (payload < P) std::memset(buffers[i].get() + got[i], 0, P - payload);
  }
  std::vector<int> have;
  std::vector<const unsigned char*> have_bytes;
  std::vector<int> want;
  std::vector<unsigned char*> want_out;
  for (int r = 0; r < g.n && static_cast<int>(have.size()) < g.k; ++r) {
    if (!in_group[static_cast<size_t>(r)]) continue;
    have.push_back(r);
    have_bytes.push_back(reinterpret_cast<const unsigned char*>(
        buffers[static_cast<size_t>(r)].get() + kFragmentHeaderSize));
  }
  for (int j = 0; j < g.k; ++j) {
    char* at = chunk.bytes.data() + size_t{g.F} * static_cast<size_t>(j);
    if (in_group[static_cast<size_t>(j)]) {
      std::memcpy(at, buffers[static_cast<size_t>(j)].get() + kFragmentHeaderSize, P);
    } else {
      want.push_back(j);
      want_out.push_back(reinterpret_cast<unsigned char*>(at));
    }
  }
  if (absl::Status s = CodeFor(g.k, g.m).Decode(P, have, have_bytes.data(), want, want_out.data());
      !s.ok()) {
    return AnnotateError(s, chunk_name);
  }
  if (!want.empty() || missing > 0 || !failure.ok()) {
    for (int r = 0; r < g.n; ++r) {
      const size_t i = static_cast<size_t>(r);
      if (in_group[i] || !ShouldWarnAboutServer(servers[i])) continue;
      CKPTFS_LOG(kWarning) << chunk_name << ": "
                           << (chunk.fragment_status[i].ok()
                                   ? absl::StrCat(PieceName(r, g, servers[i]),
                                                  " holds another version")
                                   : std::string(chunk.fragment_status[i].message()))
                           << "; decoded from the other fragments (said once a minute per server)";
    }
  }
  const Fragments expected =
      check_all ? Encode(g, chunk.bytes.data(), chunk.length, chunk.write_id) : Fragments();
  for (int r = 0; r < g.n; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (!in_group[i]) {
      if (chunk.fragment_status[i].ok()) {
        chunk.fragment_status[i] = ErrnoStatus(
            EIO, absl::StrCat(PieceName(r, g, servers[i]), " holds another version of the chunk"));
      }
      continue;
    }
    if (check_all && (got[i] != expected.sizes[i] ||
                      std::memcmp(buffers[i].get(), expected.buffers[i].get(), got[i]) != 0)) {
      chunk.fragment_status[i] = ErrnoStatus(
          EIO, absl::StrCat(PieceName(r, g, servers[i]),
                            " differs from what the chunk's other fragments encode to"));
      continue;
    }
    chunk.fragment_good[i] = true;
  }
  return chunk;
}

absl::StatusOr<size_t> ReadChunkFragments(ChunkTransport& transport, FailedServers* failed,
                                          const meta::Layout& layout, uint64_t ino,
                                          uint64_t chunk_index, uint32_t offset, char* out,
                                          size_t length) {
  if (length == 0) return 0;
  const Geometry g = GeometryOf(layout);
  const uint64_t end = uint64_t{offset} + length;
  auto note = [&](uint32_t server, const absl::Status& status) {
    if (failed == nullptr) return;
    if (status.ok() || ErrnoFromStatus(status) == ENOENT) {
      failed->NoteAnswered(server);
    } else {
      failed->NoteFailed(server);
    }
  };
  // The data fragments holding the bytes, read straight, provided every
  // data fragment's header names one write (id and length) and each
  // fragment read holds what that length gives it; otherwise the whole
  // chunk is read and the version most fragments hold decoded.
  bool whole_needed = false;
  std::optional<FragmentHeader> version;
  for (int j = 0; j < g.k && !whole_needed; ++j) {
    const uint32_t server = ReplicaServer(layout, chunk_index, j);
    char head[kFragmentHeaderSize];
    absl::StatusOr<size_t> read =
        transport.ReadChunk(server, ino, chunk_index, 0, head, sizeof(head));
    note(server, read.status());
    FragmentHeader header;
    if (!read.ok() || !GetHeader(head, *read, &header) ||
        (version.has_value() &&
         (header.write_id != version->write_id || header.length != version->length))) {
      whole_needed = true;
    }
    version = header;
  }
  uint64_t valid_end = offset;
  for (uint64_t j = offset / g.F; !whole_needed && j < static_cast<uint64_t>(g.k) && j * g.F < end;
       ++j) {
    const uint64_t lo = std::max<uint64_t>(offset, j * g.F);
    const uint64_t hi = std::min<uint64_t>(end, (j + 1) * g.F);
    const uint32_t server = ReplicaServer(layout, chunk_index, static_cast<int>(j));
    char* into = out + (lo - offset);
    absl::StatusOr<size_t> read = transport.ReadChunk(
        server, ino, chunk_index, static_cast<uint32_t>(kFragmentHeaderSize + lo - j * g.F), into,
        hi - lo);
    note(server, read.status());
    // The chunk's bytes this fragment holds end at `stored_end`.
    const uint64_t stored_end =
        std::min<uint64_t>((j + 1) * g.F, std::max<uint64_t>(j * g.F, version->length));
    const uint64_t expected = stored_end > lo ? std::min(hi, stored_end) - lo : 0;
    if (!read.ok() || std::min<size_t>(*read, hi - lo) != expected) {
      whole_needed = true;
      break;
    }
    std::memset(into + expected, 0, (hi - lo) - expected);
    if (expected > 0) valid_end = lo + expected;
  }
  if (!whole_needed) return static_cast<size_t>(valid_end - offset);  // zeros past it
  absl::StatusOr<DecodedChunk> chunk =
      ReadWholeChunkFragments(transport, failed, layout, ino, chunk_index, /*check_all=*/false);
  if (!chunk.ok()) return chunk.status();
  const uint64_t have_end = std::min<uint64_t>(end, chunk->length);
  const size_t n = have_end > offset ? static_cast<size_t>(have_end - offset) : 0;
  if (n > 0) std::memcpy(out, chunk->bytes.data() + offset, n);
  std::memset(out + n, 0, length - n);
  return n;
}

absl::Status CutChunkFragments(ChunkTransport& transport, const meta::Layout& layout, uint64_t ino,
                               uint64_t chunk_index, uint32_t keep) {
  absl::StatusOr<DecodedChunk> chunk =
      ReadWholeChunkFragments(transport, nullptr, layout, ino, chunk_index, /*check_all=*/false);
  if (!chunk.ok()) {
    if (ErrnoFromStatus(chunk.status()) == ENOENT) return absl::OkStatus();  // a hole
    return AnnotateError(chunk.status(), absl::StrCat("read of chunk ", chunk_index,
                                                      " to cut it to ", keep, " bytes"));
  }
  if (chunk->length <= keep) return absl::OkStatus();
  const Geometry g = GeometryOf(layout);
  const Fragments fragments = Encode(g, chunk->bytes.data(), keep, NewWriteId());
  const std::vector<uint32_t> servers = ReplicaServers(layout, chunk_index);
  // Every fragment is written even after one failed: stopping would leave
  // as many old as new fragments (neither k), and the chunk unreadable; one
  // failure leaves n - 1 new ones.
  absl::Status first_error;
  for (int r = 0; r < g.n; ++r) {
    const size_t i = static_cast<size_t>(r);
    absl::Status status = transport.WriteChunk(servers[i], ino, chunk_index, 0,
                                               fragments.buffers[i].get(), fragments.sizes[i],
                                               /*replace=*/true);
    if (!status.ok() && first_error.ok()) {
      first_error = AnnotateError(status, absl::StrCat("cut of chunk ", chunk_index, " to ", keep,
                                                       " bytes: ", PieceName(r, g, servers[i])));
    }
  }
  return first_error;
}

std::vector<char> EncodeFragment(const meta::Layout& layout, const DecodedChunk& chunk, int r) {
  const Geometry g = GeometryOf(layout);
  const Fragments fragments = Encode(g, chunk.bytes.data(), chunk.length, chunk.write_id);
  const size_t i = static_cast<size_t>(r);
  return std::vector<char>(fragments.buffers[i].get(),
                           fragments.buffers[i].get() + fragments.sizes[i]);
}

}  // namespace ckptfs::client
