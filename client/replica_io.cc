// See replica_io.h.
#include "client/replica_io.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/layout.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::client {
namespace {

// `status` (not OK) with `context` in front, its errno and code kept.
absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  const int err = ErrnoFromStatus(status);
  return ErrnoStatusWithCode(status.code(), err == 0 ? EIO : err,
                             absl::StrCat(context, ": ", status.message()));
}

std::string CopyName(int replica, int copies, uint32_t server_id) {
  return absl::StrCat("copy ", replica + 1, " of ", copies, " (storage server ", server_id, ")");
}

// A warning about a server at most once a minute per server id: a down
// server would otherwise add a line to every read of its chunks.
bool ShouldWarnAbout(uint32_t server_id) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* last = new absl::flat_hash_map<uint32_t, absl::Time>();  // guarded by mu
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu);
  auto [it, first] = last->emplace(server_id, now);
  if (first) return true;
  if (now - it->second < absl::Minutes(1)) return false;
  it->second = now;
  return true;
}

// Servers whose last answer to a read was a failure (down, unreachable,
// timed out), and when: for kSuspectFor afterwards their copies are tried
// last, so that a server that vanished without refusing connections costs
// one timeout, not one per chunk read. Process-wide, like the warnings.
constexpr absl::Duration kSuspectFor = absl::Seconds(15);

absl::Mutex suspects_mu(absl::kConstInit);
absl::flat_hash_map<uint32_t, absl::Time>& Suspects() {
  static auto* suspects = new absl::flat_hash_map<uint32_t, absl::Time>();  // by suspects_mu
  return *suspects;
}

void NoteReadFailed(uint32_t server_id) {
  absl::MutexLock lock(&suspects_mu);
  Suspects()[server_id] = absl::Now();
}

void NoteReadAnswered(uint32_t server_id) {
  absl::MutexLock lock(&suspects_mu);
  if (!Suspects().empty()) Suspects().erase(server_id);
}

// `order` (copy numbers) with the copies on suspect servers moved last,
// keeping the order within each group.
void SuspectsLast(const meta::Layout& layout, uint64_t chunk_index, std::vector<int>& order) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&suspects_mu);
  if (Suspects().empty()) return;
  std::stable_partition(order.begin(), order.end(), [&](int r) {
    auto it = Suspects().find(ReplicaServer(layout, chunk_index, r));
    return it == Suspects().end() || now - it->second >= kSuspectFor;
  });
}

// What the copies of one chunk write share: the last copy to answer
// reports for all.
struct CopiesInFlight {
  explicit CopiesInFlight(int copies, absl::AnyInvocable<void(absl::Status) &&> done)
      : remaining(copies), done(std::move(done)) {}

  // Records one copy's answer; calls `done` after the last.
  void Answer(absl::Status status) {
    if (!status.ok()) {
      absl::MutexLock lock(&mu);
      if (first_error.ok()) first_error = std::move(status);
    }
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    absl::Status result;
    {
      absl::MutexLock lock(&mu);
      result = std::move(first_error);
    }
    std::move(done)(std::move(result));
  }

  std::atomic<int> remaining;
  absl::AnyInvocable<void(absl::Status) &&> done;
  absl::Mutex mu;
  absl::Status first_error ABSL_GUARDED_BY(mu);
};

}  // namespace

void WriteChunkCopies(ChunkTransport& transport, IoExecutor& executor, const meta::Layout& layout,
                      const ChunkWrite& write, absl::AnyInvocable<void(absl::Status) &&> done) {
  const std::vector<uint32_t> servers = ReplicaServers(layout, write.chunk_index);
  const int copies = static_cast<int>(servers.size());
  if (copies == 1) {
    // One copy: no shared state, as before replication.
    executor.Submit([&transport, write, server = servers[0], done = std::move(done)]() mutable {
      absl::Status status =
          transport.WriteChunk(server, write.ino, write.chunk_index, write.offset, write.data,
                               write.length, write.replace, write.crc32c);
      std::move(done)(std::move(status));
    });
    return;
  }
  // Each copy is a task of its own, so that they travel in parallel and no
  // executor thread waits for another task.
  auto shared = std::make_shared<CopiesInFlight>(copies, std::move(done));
  for (int r = 0; r < copies; ++r) {
    executor.Submit([&transport, write, shared, r, copies, server = servers[r]] {
      absl::Status status =
          transport.WriteChunk(server, write.ino, write.chunk_index, write.offset, write.data,
                               write.length, write.replace, write.crc32c);
      if (!status.ok()) status = Annotate(status, CopyName(r, copies, server));
      shared->Answer(std::move(status));
    });
  }
}

absl::StatusOr<size_t> ReadChunkCopy(ChunkTransport& transport, const meta::Layout& layout,
                                     uint64_t ino, uint64_t chunk_index, uint32_t offset,
                                     char* out, size_t length) {
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
  SuspectsLast(layout, chunk_index, order);
  absl::Status failure;         // the first failure that was not ENOENT
  std::vector<int> missing_on;  // copies that said ENOENT
  for (int k = 0; k < copies; ++k) {
    const int r = order[static_cast<size_t>(k)];
    const uint32_t server = ReplicaServer(layout, chunk_index, r);
    absl::StatusOr<size_t> got = transport.ReadChunk(server, ino, chunk_index, offset, out, length);
    if (got.ok() || ErrnoFromStatus(got.status()) == ENOENT) {
      NoteReadAnswered(server);
    } else {
      NoteReadFailed(server);
    }
    if (got.ok()) {
      if (!failure.ok() || !missing_on.empty()) {
        for (int m : missing_on) {
          const uint32_t lost = ReplicaServer(layout, chunk_index, m);
          if (!ShouldWarnAbout(lost)) continue;
          CKPTFS_LOG(kWarning) << "chunk " << chunk_index << " of inode " << ino
                               << " is missing on " << CopyName(m, copies, lost)
                               << "; read from storage server " << server
                               << " instead (said once a minute per server)";
        }
      }
      return got;
    }
    if (ErrnoFromStatus(got.status()) == ENOENT) {
      missing_on.push_back(r);
      continue;
    }
    if (k + 1 < copies && ShouldWarnAbout(server)) {
      CKPTFS_LOG(kWarning) << "read of chunk " << chunk_index << " of inode " << ino << " from "
                           << CopyName(r, copies, server) << " failed (" << got.status().message()
                           << "); reading another copy (said once a minute per server)";
    }
    if (failure.ok()) failure = Annotate(got.status(), CopyName(r, copies, server));
  }
  if (!failure.ok()) {
    return Annotate(failure, absl::StrCat("no copy of the chunk could be read (",
                                          missing_on.size(), " of ", copies, " missing)"));
  }
  return ErrnoStatus(ENOENT, absl::StrCat("chunk ", chunk_index, " of inode ", ino,
                                          " is on none of its ", copies, " copies"));
}

void ForgetReadFailuresForTesting() {
  absl::MutexLock lock(&suspects_mu);
  Suspects().clear();
}

}  // namespace ckptfs::client
