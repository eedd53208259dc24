// OpenFileRegistry: inode -> the OpenFileState shared by every open of that
// inode in one Client. Holds weak references: a state lives as long as a
// File (or a chunk request in flight) holds it, and unregisters itself when
// it dies.
//
// Thread-safety: thread-safe (one mutex, never held across I/O, nor while
// an OpenFileState's mutex is held; `make` runs under it and must not lock
// anything of a state).
#ifndef CKPTFS_CLIENT_OPEN_FILE_REGISTRY_H_
#define CKPTFS_CLIENT_OPEN_FILE_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ckptfs::client {

class OpenFileState;

class OpenFileRegistry {
 public:
  OpenFileRegistry() = default;
  OpenFileRegistry(const OpenFileRegistry&) = delete;
  OpenFileRegistry& operator=(const OpenFileRegistry&) = delete;

  // The live state of `ino`, or null.
  std::shared_ptr<OpenFileState> Find(uint64_t ino);

  // The live state of `ino`, or the one `make` returns, registered.
  std::shared_ptr<OpenFileState> FindOrAdd(
      uint64_t ino, const std::function<std::shared_ptr<OpenFileState>()>& make);

  // Called by a dying state: forgets `ino` unless a newer state took its
  // place.
  void RemoveExpired(uint64_t ino);

  size_t size();

  // Asks the live states other than `except`, in turn (from where the last
  // call stopped), to give up one read-cache buffer
  // (OpenFileState::TryGiveUpReadBuffer); true once one did. REQUIRES: the
  // caller holds no OpenFileState's mutex.
  bool GiveUpReadBuffer(const OpenFileState* except) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::weak_ptr<OpenFileState>> states_ ABSL_GUARDED_BY(mu_);
  size_t give_up_cursor_ ABSL_GUARDED_BY(mu_) = 0;  // where GiveUpReadBuffer starts
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_OPEN_FILE_REGISTRY_H_
