// See replica_io.h.
#include "client/replica_io.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/fragment_io.h"
#include "client/io_errors.h"
#include "client/layout.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::client {
namespace {

std::string CopyName(int replica, int copies, uint32_t server_id) {
  return absl::StrCat("copy ", replica + 1, " of ", copies, " (storage server ", server_id, ")");
}

bool RefusedForAGap(const absl::Status& status) {
  return !status.ok() && ErrnoFromStatus(status) == ENODATA;
}

// The whole chunk as copy `source` stores it, written (replace) over each
// of `targets`: copies that refused `write` for a gap, rebuilt from one
// that stored it.
absl::Status RebuildFrom(ChunkTransport& transport, uint32_t chunk_size, const ChunkWrite& write,
                         uint32_t source, const std::vector<uint32_t>& targets) {
  std::unique_ptr<char[]> image(new char[chunk_size]);
  absl::StatusOr<size_t> got =
      transport.ReadChunk(source, write.ino, write.chunk_index, 0, image.get(), chunk_size);
  if (!got.ok()) {
    return AnnotateError(got.status(), absl::StrCat("read from storage server ", source,
                                                    " to rebuild the other copies"));
  }
  for (uint32_t target : targets) {
    CKPTFS_LOG(kWarning) << "chunk " << write.chunk_index << " of inode " << write.ino
                         << " on storage server " << target << " lacks bytes before offset "
                         << write.offset << " (lost?); rebuilding it from storage server "
                         << source;
    absl::Status status = transport.WriteChunk(target, write.ino, write.chunk_index, 0, image.get(),
                                               *got, /*replace=*/true);
    if (!status.ok()) {
      return AnnotateError(status, absl::StrCat("rebuild on storage server ", target));
    }
  }
  return absl::OkStatus();
}

// Every copy in `servers` refused `write` for a gap: each holds fewer than
// write.offset bytes (a hole before the write, as sparse writes make).
// Evens them out to the longest (so that a copy that lost its bytes takes
// the others'), extends each with zeros up to write.offset by an empty
// merge, and writes again.
absl::Status MakeGapAndWrite(ChunkTransport& transport, const ChunkWrite& write,
                             const std::vector<uint32_t>& servers) {
  std::unique_ptr<char[]> longest(new char[std::max<uint32_t>(write.offset, 1)]);
  std::unique_ptr<char[]> scratch(new char[std::max<uint32_t>(write.offset, 1)]);
  size_t longest_length = 0;
  std::vector<size_t> lengths;
  for (uint32_t server : servers) {
    absl::StatusOr<size_t> got =
        transport.ReadChunk(server, write.ino, write.chunk_index, 0, scratch.get(), write.offset);
    size_t length = 0;
    if (got.ok()) {
      length = std::min<size_t>(*got, write.offset);
    } else if (ErrnoFromStatus(got.status()) != ENOENT) {
      return AnnotateError(got.status(),
                           absl::StrCat("read from storage server ", server,
                                        " to fill the gap before offset ", write.offset));
    }
    if (length > longest_length) {
      std::swap(longest, scratch);
      longest_length = length;
    }
    lengths.push_back(length);
  }
  static const char kNothing = 0;
  for (size_t i = 0; i < servers.size(); ++i) {
    const uint32_t server = servers[i];
    absl::Status status;
    if (lengths[i] < longest_length) {
      CKPTFS_LOG(kWarning) << "chunk " << write.chunk_index << " of inode " << write.ino
                           << " on storage server " << server << " holds " << lengths[i]
                           << " bytes, another copy " << longest_length
                           << "; copying the longer before a write at offset " << write.offset;
      status = transport.WriteChunk(server, write.ino, write.chunk_index, 0, longest.get(),
                                    longest_length, /*replace=*/true);
    }
    if (status.ok()) {
      status = transport.WriteChunk(server, write.ino, write.chunk_index, write.offset, &kNothing,
                                    0, /*replace=*/false);
    }
    if (status.ok()) {
      status = transport.WriteChunk(server, write.ino, write.chunk_index, write.offset, write.data,
                                    write.length, write.replace, write.crc32c);
    }
    if (!status.ok()) {
      return AnnotateError(status, absl::StrCat("filling the gap before offset ", write.offset,
                                                " on storage server ", server));
    }
  }
  return absl::OkStatus();
}

// What the copies of one chunk write share: the last copy to answer
// rebuilds the copies that refused it for a gap, if any, and reports for
// all.
struct CopiesInFlight {
  CopiesInFlight(ChunkTransport& transport, uint32_t chunk_size, const ChunkWrite& write,
                 std::vector<uint32_t> servers, absl::AnyInvocable<void(absl::Status) &&> done)
      : transport(transport),
        chunk_size(chunk_size),
        write(write),
        servers(std::move(servers)),
        remaining(static_cast<int>(this->servers.size())),
        done(std::move(done)),
        answers(this->servers.size()) {}

  // Records copy `r`'s answer; after the last, finishes.
  void Answer(int r, absl::Status status) {
    {
      absl::MutexLock lock(&mu);
      answers[static_cast<size_t>(r)] = std::move(status);
    }
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::vector<absl::Status> all;
    {
      absl::MutexLock lock(&mu);
      all = std::move(answers);
    }
    std::move(done)(Finish(all));
  }

  absl::Status Finish(const std::vector<absl::Status>& all) {
    const int copies = static_cast<int>(servers.size());
    std::vector<uint32_t> gapped;
    int stored_on = -1;
    for (int r = 0; r < copies; ++r) {
      const absl::Status& status = all[static_cast<size_t>(r)];
      if (status.ok()) {
        if (stored_on < 0) stored_on = r;
      } else if (RefusedForAGap(status)) {
        gapped.push_back(servers[static_cast<size_t>(r)]);
      } else {
        // Any other failure fails the write, rebuilt or not.
        return AnnotateError(status, CopyName(r, copies, servers[static_cast<size_t>(r)]));
      }
    }
    if (gapped.empty()) return absl::OkStatus();
    if (stored_on >= 0) {
      return RebuildFrom(transport, chunk_size, write, servers[static_cast<size_t>(stored_on)],
                         gapped);
    }
    return MakeGapAndWrite(transport, write, gapped);
  }

  ChunkTransport& transport;
  const uint32_t chunk_size;
  const ChunkWrite write;
  const std::vector<uint32_t> servers;
  std::atomic<int> remaining;
  absl::AnyInvocable<void(absl::Status) &&> done;
  absl::Mutex mu;
  std::vector<absl::Status> answers ABSL_GUARDED_BY(mu);
};

}  // namespace

void FailedServers::NoteFailed(uint32_t server_id) {
  absl::MutexLock lock(&mu_);
  failed_at_[server_id] = absl::Now();
}

void FailedServers::NoteAnswered(uint32_t server_id) {
  absl::MutexLock lock(&mu_);
  if (!failed_at_.empty()) failed_at_.erase(server_id);
}

void FailedServers::MoveSuspectsLast(const meta::Layout& layout, uint64_t chunk_index,
                                     std::vector<int>& order) const {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (failed_at_.empty()) return;
  std::stable_partition(order.begin(), order.end(), [&](int r) {
    mu_.AssertHeld();  // called within this function's lock
    auto it = failed_at_.find(ReplicaServer(layout, chunk_index, r));
    return it == failed_at_.end() || now - it->second >= kSuspectFor;
  });
}

void WriteChunkCopies(ChunkTransport& transport, IoExecutor& executor, const meta::Layout& layout,
                      const ChunkWrite& write, absl::AnyInvocable<void(absl::Status) &&> done) {
  if (IsErasureCoded(layout)) {
    WriteChunkFragments(transport, executor, layout, write, std::move(done));
    return;
  }
  std::vector<uint32_t> servers = ReplicaServers(layout, write.chunk_index);
  const int copies = static_cast<int>(servers.size());
  if (copies == 1) {
    // One copy: no shared state, as before replication.
    executor.Submit([&transport, write, server = servers[0], done = std::move(done)]() mutable {
      absl::Status status =
          transport.WriteChunk(server, write.ino, write.chunk_index, write.offset, write.data,
                               write.length, write.replace, write.crc32c);
      if (RefusedForAGap(status)) status = MakeGapAndWrite(transport, write, {server});
      std::move(done)(std::move(status));
    });
    return;
  }
  // Each copy is a task of its own, so that they travel in parallel and no
  // executor thread waits for another task.
  auto shared = std::make_shared<CopiesInFlight>(transport, layout.chunk_size(), write, servers,
                                                 std::move(done));
  for (int r = 0; r < copies; ++r) {
    executor.Submit([&transport, write, shared, r, server = servers[static_cast<size_t>(r)]] {
      shared->Answer(
          r, transport.WriteChunk(server, write.ino, write.chunk_index, write.offset, write.data,
                                  write.length, write.replace, write.crc32c));
    });
  }
}

absl::StatusOr<size_t> ReadChunkCopy(ChunkTransport& transport, FailedServers* failed,
                                     const meta::Layout& layout, uint64_t ino, uint64_t chunk_index,
                                     uint32_t offset, char* out, size_t length) {
  if (IsErasureCoded(layout)) {
    return ReadChunkFragments(transport, failed, layout, ino, chunk_index, offset, out, length);
  }
  const int copies = ReplicaCount(layout);
  if (copies == 1) {
    return transport.ReadChunk(ServerForChunk(layout, chunk_index), ino, chunk_index, offset, out,
                               length);
  }
  // Runs of stripe-size consecutive chunks read from one copy, and the next
  // run from the next copy: a sequential read reaches every server evenly
  // (copy 0 alone would too) and reads every copy now and then, so a bad
  // one shows up before the day it is the only one left.
  const uint64_t stripe = static_cast<uint64_t>(layout.stripe_size());
  const int first = static_cast<int>((chunk_index / stripe) % static_cast<uint64_t>(copies));
  std::vector<int> order;
  for (int k = 0; k < copies; ++k) order.push_back((first + k) % copies);
  if (failed != nullptr) failed->MoveSuspectsLast(layout, chunk_index, order);
  absl::Status failure;         // the first failure that was not ENOENT
  std::vector<int> missing_on;  // copies that said ENOENT
  int best = -1;                // the copy whose answer is in `out`
  size_t best_length = 0;
  std::vector<std::pair<int, size_t>> answered;  // copy, bytes
  std::unique_ptr<char[]> scratch;               // later copies' answers
  for (int k = 0; k < copies; ++k) {
    const int r = order[static_cast<size_t>(k)];
    const uint32_t server = ReplicaServer(layout, chunk_index, r);
    char* into = out;
    if (best >= 0) {
      if (scratch == nullptr) scratch.reset(new char[length]);
      into = scratch.get();
    }
    absl::StatusOr<size_t> got =
        transport.ReadChunk(server, ino, chunk_index, offset, into, length);
    if (failed != nullptr) {
      if (got.ok() || ErrnoFromStatus(got.status()) == ENOENT) {
        failed->NoteAnswered(server);
      } else {
        failed->NoteFailed(server);
      }
    }
    if (got.ok()) {
      const size_t n = std::min(*got, length);
      answered.emplace_back(r, n);
      if (best < 0) {
        best = r;
        best_length = n;
      } else if (n > best_length) {
        std::memcpy(out, into, n);
        best = r;
        best_length = n;
      }
      if (best_length >= length) break;  // nothing longer to find
      continue;
    }
    if (ErrnoFromStatus(got.status()) == ENOENT) {
      missing_on.push_back(r);
      continue;
    }
    if (k + 1 < copies && ShouldWarnAboutServer(server)) {
      CKPTFS_LOG(kWarning) << "read of chunk " << chunk_index << " of inode " << ino << " from "
                           << CopyName(r, copies, server) << " failed (" << got.status().message()
                           << "); reading another copy (said once a minute per server)";
    }
    if (failure.ok()) failure = AnnotateError(got.status(), CopyName(r, copies, server));
  }
  if (best >= 0 && best_length < length && !failure.ok()) {
    // The bytes past what the answering copies hold may be on the copy that
    // failed alone (a copy that lost its tail): an error, never zeros in
    // their place. (Callers ask only for bytes within the file's size.)
    return AnnotateError(
        failure, absl::StrCat("the copies that answered hold ", best_length, " of the ", length,
                              " bytes asked for at offset ", offset,
                              ", and the rest may be on the copy that failed"));
  }
  if (best >= 0) {
    const uint32_t server = ReplicaServer(layout, chunk_index, best);
    for (int m : missing_on) {
      const uint32_t lost = ReplicaServer(layout, chunk_index, m);
      if (!ShouldWarnAboutServer(lost)) continue;
      CKPTFS_LOG(kWarning) << "chunk " << chunk_index << " of inode " << ino << " is missing on "
                           << CopyName(m, copies, lost) << "; read from storage server " << server
                           << " instead (said once a minute per server)";
    }
    for (const auto& [r, n] : answered) {
      if (n == best_length) continue;
      const uint32_t shorter = ReplicaServer(layout, chunk_index, r);
      if (!ShouldWarnAboutServer(shorter)) continue;
      CKPTFS_LOG(kWarning) << "copies of chunk " << chunk_index << " of inode " << ino
                           << " differ: " << CopyName(r, copies, shorter) << " holds " << n
                           << " of the bytes at offset " << offset << ", storage server " << server
                           << " " << best_length
                           << "; read the longer (said once a minute per server)";
    }
    return best_length;
  }
  if (!failure.ok()) {
    return AnnotateError(failure, absl::StrCat("no copy of the chunk could be read (",
                                               missing_on.size(), " of ", copies, " missing)"));
  }
  return ErrnoStatus(ENOENT, absl::StrCat("chunk ", chunk_index, " of inode ", ino,
                                          " is on none of its ", copies, " copies"));
}

}  // namespace ckptfs::client
