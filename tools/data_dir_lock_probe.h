// Whether a storage server still runs on a data directory, told by the lock
// it holds rather than by the pid `ckptfs up` recorded.
//
// A running ckptfs-storage holds <data_dir>/LOCK with flock(LOCK_EX) and an
// OFD read lock, and writes its pid into the file
// (server/storage/data_dir.h); the kernel drops both locks when the process
// dies, however it dies. So a LOCK that is still locked means a server still
// runs on the directory, whatever cluster.state says about its pid. `ckptfs
// down` uses this to confirm each storage server is gone (and to stop one its
// record failed to identify); `ckptfs up` to refuse a directory in use.
//
// The holders are found through /proc: the pids the kernel's lock table
// (/proc/locks) and the LOCK file name, kept only if that process has LOCK
// open now. A process that merely has LOCK open (a client on this host
// probing the running-lock before reading chunk files in place) is not a
// holder. Processes of other users whose /proc entries we may not read go
// unseen. Thread-compatible; touches only the named directory and /proc.
#ifndef CKPTFS_TOOLS_DATA_DIR_LOCK_PROBE_H_
#define CKPTFS_TOOLS_DATA_DIR_LOCK_PROBE_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ckptfs::tools {

// True while some process holds a lock on <data_dir>/LOCK (a flock, or an
// OFD or POSIX record lock); false when nobody does or there is no LOCK.
// Probing takes a shared flock for an instant. An error when it cannot tell
// (LOCK unreadable): a caller must not take that for "not running".
absl::StatusOr<bool> DataDirLocked(const std::string& data_dir);

// The processes, other than the caller, that hold the lock on
// <data_dir>/LOCK: named by /proc/locks or by the pid in LOCK, and having
// the file open now. Empty when there are none (or none we may see).
std::vector<pid_t> DataDirLockHolders(const std::string& data_dir);

// Makes sure no server runs on `data_dir` any more: when its LOCK is held,
// stops the holders (SIGTERM, SIGKILL after `grace`; StopProcesses) and
// waits a few seconds for the lock to be free. Returns the pids it stopped
// (empty: the LOCK was free already). FailedPrecondition, naming the
// directory and the pids, when the lock is still held afterwards or its
// holder cannot be found or signalled; the DataDirLocked error when it
// cannot tell.
absl::StatusOr<std::vector<pid_t>> EnsureDataDirReleased(const std::string& data_dir,
                                                         absl::Duration grace);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_DATA_DIR_LOCK_PROBE_H_
