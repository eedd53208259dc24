// Scrubber: the storage server's background check of the chunks it stores.
//
// One thread walks the store (ChunkStore::ForEachChunk), rereads every chunk
// whole and checks it against its CRC32C (ChunkStore::Scrub), at most
// `bytes_per_s` so that it never crowds out a save storm, then rests for
// `pass_interval` and starts over. A chunk that fails is moved aside
// (quarantine/, logged): it then reads as missing on this server, so reads
// fall over to another copy, and the repairer (`ckptfs repair`, which
// compares the copies of every replicated chunk) writes it again from a
// good one. Bit rot is thereby found even in chunks nobody reads.
//
// What it found is reported three ways: the log (each corrupt chunk), the
// metrics ckptfs_storage_scrub_{chunks,bytes,corrupt,passes}_total, and
// Report(), which the server's heartbeat carries to the metadata service for
// `ckptfs status`.
//
// Thread-safety: Report() from any thread; Stop() (also the destructor)
// from one thread.
#ifndef CKPTFS_SERVER_STORAGE_SCRUBBER_H_
#define CKPTFS_SERVER_STORAGE_SCRUBBER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/meta.pb.h"
#include "server/storage/chunk_store.h"

namespace ckptfs::storage {

class Scrubber {
 public:
  struct Options {
    // Chunk file bytes reread per second, at most. 0 turns scrubbing off
    // (Start then runs no thread).
    uint64_t bytes_per_s = uint64_t{16} << 20;
    // Rest between the end of one pass and the start of the next.
    absl::Duration pass_interval = absl::Hours(1);
    // Wait before the first pass (let a starting server serve first).
    absl::Duration first_pass_delay = absl::Seconds(30);
  };

  // Starts the scrubbing thread. `store` is borrowed and must outlive the
  // Scrubber. Fails only if the thread's io_uring cannot be made.
  static absl::StatusOr<std::unique_ptr<Scrubber>> Start(Options options, ChunkStore& store);

  Scrubber(const Scrubber&) = delete;
  Scrubber& operator=(const Scrubber&) = delete;
  ~Scrubber() { Stop(); }

  // Stops the thread: it finishes the chunk it is reading, then exits.
  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Totals since Start (bytes_per_s_limit is the option).
  meta::ScrubReport Report() const;

 private:
  Scrubber(Options options, ChunkStore& store, std::unique_ptr<Ring> ring);
  void Run();
  enum class PassEnd { kCompleted, kFailed, kStopped };
  // One walk over the store. kFailed: the store could not be listed.
  PassEnd Pass() ABSL_LOCKS_EXCLUDED(mu_);
  // Sleeps until `until` or Stop(); false if stopped.
  bool SleepUntil(absl::Time until) ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  ChunkStore& store_;
  std::unique_ptr<Ring> ring_;  // used by the thread only

  std::atomic<uint64_t> chunks_checked_{0};
  std::atomic<uint64_t> bytes_checked_{0};
  std::atomic<uint64_t> corrupt_found_{0};
  std::atomic<uint64_t> passes_completed_{0};
  std::atomic<int64_t> last_pass_end_ms_{0};

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_SCRUBBER_H_
