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
// The holders are found only by evidence of a lock: a process with an fd on
// LOCK (same device and inode) whose /proc/<pid>/fdinfo/<fd> lists a lock
// (`lock:` lines: the flock and OFD locks taken through that open file, and
// POSIX locks of that process). The pid written in LOCK is never used: it
// may be stale (a new server writes it only after it has locked the file; a
// server of another pid namespace; a recycled pid), and the process it
// names may be a client on this host that keeps LOCK open without a lock,
// only to probe the running-lock (client/local_chunk_transport.cc). Nor is
// /proc/locks: its pids are the lockers' (OFD locks show none), not the
// current holders'. Processes of other users whose /proc entries we may not
// read go unseen. Thread-compatible; touches only the named directory and
// /proc, and signals only holders.
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

// The processes, other than the caller, that hold a lock on
// <data_dir>/LOCK now, by the evidence above. Scans every process in /proc
// (only fds on regular files are looked at closely) and, for a process whose
// main thread has exited, the fds its other threads hold. Empty when there
// are none (or none we may see).
std::vector<pid_t> DataDirLockHolders(const std::string& data_dir);

// What EnsureDataDirReleased found and did.
struct DataDirRelease {
  bool released = false;       // nobody holds <data_dir>/LOCK now (or there is none)
  std::vector<pid_t> stopped;  // holders it stopped (SIGTERM, or SIGKILL after `grace`)
  // When !released: why, naming LOCK, the directory and the holders with
  // what was tried (or how to find them by hand).
  std::string still_held;
};

// Makes sure no server runs on `data_dir` any more: when its LOCK is held,
// stops the holders (SIGTERM, SIGKILL after `grace`; StopProcesses, which
// signals a holder only if it still is the process whose start time was
// taken before its lock was seen) and waits a few seconds for the lock to be
// free. A lock whose holder does not show (say, a SIGKILLed server whose
// threads are still exiting) is polled for a few seconds before it counts as
// held. An error only when it cannot tell (DataDirLocked's error): a caller
// must take that neither for "stopped" nor for "still running".
absl::StatusOr<DataDirRelease> EnsureDataDirReleased(const std::string& data_dir,
                                                     absl::Duration grace);

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_DATA_DIR_LOCK_PROBE_H_
