// The storage server's data directory as a whole: creating it, claiming it
// for one process, and the server's identity stored in it.
//
//   <data_dir>/LOCK          mode 0600: flock()ed by the running server (holds its pid),
//                            which also holds an OFD read lock on it: the
//                            running-lock that clients on this host probe
//                            (F_OFD_GETLK) before reading chunk files in
//                            place (client/local_chunk_transport.h)
//   <data_dir>/server.uuid   random identity, created once; the metadata
//                            service maps it to the server id
//
// Thread-safety: pure functions; a DataDirLock belongs to one owner.
#ifndef CKPTFS_SERVER_STORAGE_DATA_DIR_H_
#define CKPTFS_SERVER_STORAGE_DATA_DIR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ckptfs::storage {

// mkdir -p.
absl::Status CreateDirectories(const std::string& path);

// An exclusive claim on a data directory, released when destroyed (or when
// the process dies, however it dies). Move-only.
class DataDirLock {
 public:
  // Claims `data_dir`. EBUSY with a message naming the directory when
  // another process holds it. First makes the directory not writable by
  // the group and others, and the LOCK file this user's alone (0600), so
  // that no other local user can hold a lock on it (keeping the server
  // from starting, or making a dead server look alive to the clients on
  // this host); an error says what to change where that cannot be done.
  static absl::StatusOr<DataDirLock> Acquire(const std::string& data_dir);

 private:
  explicit DataDirLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// The server's identity: read from <data_dir>/server.uuid, or made up
// (random, UUID v4 text) and stored durably on first use.
absl::StatusOr<std::string> LoadOrCreateServerUuid(const std::string& data_dir);

// The secret that proves the uuid is this directory's when the server
// registers (RegisterServerRequest.identity_secret): <data_dir>/server.secret
// (mode 0600, random, made on first use like a credential).
absl::StatusOr<std::string> LoadOrCreateServerSecret(const std::string& data_dir);

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_DATA_DIR_H_
