// FaultInjectionFileSystem: a FileSystem for tests that models what a power
// loss keeps of a directory tree, after LevelDB's db/fault_injection_test.cc.
//
// Every call goes to a real FileSystem underneath (the files exist on disk
// as usual); beside it this one keeps a model of the tree under `root`:
// which file or directory each name stands for now, and what is durable —
//   - a file's contents as of its last SyncFiles (fdatasync) or
//     SyncFileSystem; a file never synced has no durable contents;
//   - a directory's entries (name -> file or directory) as of its last
//     SyncDir (fsync of the directory) or SyncFileSystem.
// Syncing a file does not make its name durable, and syncing a directory
// does not make its own name in its parent durable, as POSIX promises
// nothing more (ext4 and xfs often do more; a store must not count on it).
//
// DropUnsyncedData() then does what a power loss would: it rewrites the
// tree under `root` into exactly its durable state. Names not durably
// entered disappear, renames and unlinks since the directory's last sync
// are undone (the replaced file comes back with its durable contents), and
// a file comes back with its last synced contents, or empty when its data
// was never synced (while its name was).
//
// The model learns a file's contents by reading the file at sync time (the
// data itself moves through io_uring on the fds Open returns, unseen), so
// it takes a file to hold then what the sync made durable: true of a store
// that writes a file whole before it publishes it (ChunkStore).
//
// What is under `root` when the object is made counts as durable. Only
// changes made through this object are modeled: make every change under
// `root` through it. Paths must be spelled as `root` + "/" + a relative
// path (no "..", no symbolic links), as ChunkStore spells them; paths
// outside `root` pass through unmodeled.
//
// Thread-safety: every method may be called from any thread; each holds one
// mutex across the real call and the model's update (so the model never
// disagrees with the disk, at the cost of serializing all file calls).
// DropUnsyncedData REQUIRES that nothing else uses files under `root`
// (close the ChunkStore first: the process "lost power").
#ifndef CKPTFS_SERVER_STORAGE_TESTING_FAULT_INJECTION_FILE_SYSTEM_H_
#define CKPTFS_SERVER_STORAGE_TESTING_FAULT_INJECTION_FILE_SYSTEM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/storage/file_system.h"

namespace ckptfs::storage {

class FaultInjectionFileSystem final : public FileSystem {
 public:
  // What DropUnsyncedData left, for test messages.
  struct DropReport {
    size_t files = 0;         // files restored
    size_t dirs = 0;          // directories restored (root not counted)
    size_t never_synced = 0;  // files restored empty: name durable, data never synced
  };

  // Models the tree under `root` (an existing directory; what it holds now
  // counts as durable), calling `base` (borrowed, must outlive this) for the
  // real work.
  static absl::StatusOr<std::unique_ptr<FaultInjectionFileSystem>> Create(
      const std::string& root, FileSystem& base = FileSystem::Default());

  FaultInjectionFileSystem(const FaultInjectionFileSystem&) = delete;
  FaultInjectionFileSystem& operator=(const FaultInjectionFileSystem&) = delete;

  absl::StatusOr<UniqueFd> Open(const std::string& path, int flags, mode_t mode) override;
  absl::Status Rename(const std::string& from, const std::string& to) override;
  absl::Status Unlink(const std::string& path) override;
  absl::Status MakeDir(const std::string& path) override;
  absl::Status RemoveDir(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  absl::StatusOr<struct stat> Stat(const std::string& path) override;
  absl::StatusOr<struct statvfs> StatFileSystem(const std::string& path) override;
  absl::Status SyncFiles(Ring& ring, absl::Span<const std::string> paths) override;
  absl::Status SyncDir(Ring& ring, const std::string& path) override;
  absl::Status SyncFileSystem(const std::string& path) override;

  // Simulates a power loss: puts the tree under `root` back into its
  // durable state (see above), which then is the state now, all of it
  // durable. REQUIRES: nothing else uses files under `root` meanwhile.
  absl::StatusOr<DropReport> DropUnsyncedData();

  // Makes the next SyncFiles, SyncDir or SyncFileSystem fail with `err`
  // as a write-back error does (see above): the files it covered whose
  // contents now are not durable keep their durable contents (none, if
  // never synced) through every later sync until they are written again.
  void InjectWritebackError(int err) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using NodeId = uint64_t;
  static constexpr NodeId kRoot = 0;

  // A file or directory: what it is now, and what of it is durable.
  struct Node {
    bool is_dir = false;
    // Files: contents as of the last sync; none if never synced.
    std::optional<std::string> durable_data;
    // Files: a write-back error lost the pages not yet durable; syncs keep
    // durable_data as it is until the file is opened for writing.
    bool writeback_lost = false;
    // Directories: entries now, and as of the last sync.
    std::map<std::string, NodeId> entries;
    std::map<std::string, NodeId> durable_entries;
  };
  // Where a path's name lives: its parent directory's node and the name.
  struct Place {
    NodeId parent = kRoot;
    std::string name;
  };

  FaultInjectionFileSystem(std::string root, FileSystem& base);

  // The place of `path` under root_, or none when `path` is root_ itself or
  // outside it. Parent directories the model lacks (made behind its back)
  // are added, not durable.
  std::optional<Place> Locate(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The node named by `path`, added (not durable) when the model lacks it
  // but the disk has it; none outside root_ or when the disk lacks it too.
  std::optional<NodeId> Find(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  NodeId NewNode(bool is_dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the contents of the file at `path` (node `id`) as durable.
  absl::Status SnapshotFile(const std::string& path, NodeId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the subtree at `path` (node `id`) durable as it is now.
  absl::Status SnapshotTree(const std::string& path, NodeId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails the sync of `paths` (files or directories; `what` names the
  // call) with the injected write-back error, consuming it: files among
  // them (for a directory, every file below it) whose contents are not
  // durable lose them.
  absl::Status FailWriteback(absl::Span<const std::string> paths, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the files at or under `path` (node `id`) whose contents are not
  // durable as lost to a write-back error.
  absl::Status LoseUnsynced(const std::string& path, NodeId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds what the disk holds under `path` (a directory, node `id`) to the
  // model, as durable.
  absl::Status Scan(const std::string& path, NodeId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string root_;
  FileSystem& base_;
  absl::Mutex mu_;
  std::unordered_map<NodeId, Node> nodes_ ABSL_GUARDED_BY(mu_);
  NodeId next_id_ ABSL_GUARDED_BY(mu_) = kRoot + 1;
  int writeback_error_ ABSL_GUARDED_BY(mu_) = 0;  // 0: none injected
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_TESTING_FAULT_INJECTION_FILE_SYSTEM_H_
