// See fault_injection_file_system.h.
#include "server/storage/testing/fault_injection_file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/errno_status.h"

namespace ckptfs::storage {
namespace {

// Deeper than any tree a test makes: a guard against a cycle that durable
// entries of different ages could in theory describe.
constexpr int kMaxDepth = 64;

// The whole contents of the file at `path`, read with plain buffered I/O.
absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return SyscallError(errno, absl::StrCat("open ", path, " to model it"));
  std::string data;
  char block[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd.get(), block, sizeof(block));
    if (got < 0) {
      if (errno == EINTR) continue;
      return SyscallError(errno, absl::StrCat("read ", path, " to model it"));
    }
    if (got == 0) return data;
    data.append(block, static_cast<size_t>(got));
  }
}

absl::Status WriteWhole(const std::string& path, absl::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return SyscallError(errno, absl::StrCat("create ", path, " to restore it"));
  while (!data.empty()) {
    const ssize_t put = ::write(fd.get(), data.data(), data.size());
    if (put < 0) {
      if (errno == EINTR) continue;
      return SyscallError(errno, absl::StrCat("write ", path, " to restore it"));
    }
    data.remove_prefix(static_cast<size_t>(put));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FaultInjectionFileSystem>> FaultInjectionFileSystem::Create(
    const std::string& root, FileSystem& base) {
  std::string trimmed = root;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  std::unique_ptr<FaultInjectionFileSystem> fs(new FaultInjectionFileSystem(trimmed, base));
  absl::MutexLock lock(&fs->mu_);
  fs->nodes_[kRoot].is_dir = true;
  if (absl::Status s = fs->Scan(fs->root_, kRoot); !s.ok()) return s;
  return fs;
}

FaultInjectionFileSystem::FaultInjectionFileSystem(std::string root, FileSystem& base)
    : root_(std::move(root)), base_(base) {}

FaultInjectionFileSystem::NodeId FaultInjectionFileSystem::NewNode(bool is_dir) {
  const NodeId id = next_id_++;
  nodes_[id].is_dir = is_dir;
  return id;
}

std::optional<FaultInjectionFileSystem::Place> FaultInjectionFileSystem::Locate(
    const std::string& path) {
  if (path.size() <= root_.size() + 1 || path.compare(0, root_.size(), root_) != 0 ||
      path[root_.size()] != '/') {
    return std::nullopt;
  }
  std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(path).substr(root_.size() + 1), '/', absl::SkipEmpty());
  if (parts.empty()) return std::nullopt;
  NodeId dir = kRoot;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    auto& entries = nodes_[dir].entries;
    auto it = entries.find(parts[i]);
    if (it == entries.end() || !nodes_[it->second].is_dir) {
      const NodeId added = NewNode(/*is_dir=*/true);
      nodes_[dir].entries[parts[i]] = added;
      dir = added;
    } else {
      dir = it->second;
    }
  }
  return Place{dir, std::move(parts.back())};
}

std::optional<FaultInjectionFileSystem::NodeId> FaultInjectionFileSystem::Find(
    const std::string& path) {
  if (path == root_) return kRoot;
  std::optional<Place> place = Locate(path);
  if (!place.has_value()) return std::nullopt;
  auto& entries = nodes_[place->parent].entries;
  if (auto it = entries.find(place->name); it != entries.end()) return it->second;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  const NodeId added = NewNode(S_ISDIR(st.st_mode));
  nodes_[place->parent].entries[place->name] = added;
  return added;
}

absl::Status FaultInjectionFileSystem::SnapshotFile(const std::string& path, NodeId id) {
  if (nodes_[id].writeback_lost) return absl::OkStatus();  // its pages are gone
  auto data = ReadWhole(path);
  if (!data.ok()) return data.status();
  nodes_[id].durable_data = *std::move(data);
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::SnapshotTree(const std::string& path, NodeId id) {
  Node& node = nodes_[id];
  if (!node.is_dir) return SnapshotFile(path, id);
  node.durable_entries = node.entries;
  // Copy: SnapshotTree of a child may add nodes (never to this map).
  const std::map<std::string, NodeId> entries = node.entries;
  for (const auto& [name, child] : entries) {
    if (absl::Status s = SnapshotTree(absl::StrCat(path, "/", name), child); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::LoseUnsynced(const std::string& path, NodeId id) {
  Node& node = nodes_[id];
  if (node.is_dir) {
    const std::map<std::string, NodeId> entries = node.entries;
    for (const auto& [name, child] : entries) {
      if (absl::Status s = LoseUnsynced(absl::StrCat(path, "/", name), child); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  auto data = ReadWhole(path);
  if (!data.ok()) return data.status();
  if (!node.durable_data.has_value() || *node.durable_data != *data) node.writeback_lost = true;
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::FailWriteback(absl::Span<const std::string> paths,
                                                     absl::string_view what) {
  const int err = writeback_error_;
  writeback_error_ = 0;
  for (const std::string& path : paths) {
    std::optional<NodeId> id = Find(path);
    if (!id.has_value()) continue;
    if (absl::Status s = LoseUnsynced(path, *id); !s.ok()) return s;
  }
  return ErrnoStatus(err, absl::StrCat(what, ": injected write-back error"));
}

void FaultInjectionFileSystem::InjectWritebackError(int err) {
  absl::MutexLock lock(&mu_);
  writeback_error_ = err;
}

absl::Status FaultInjectionFileSystem::Scan(const std::string& path, NodeId id) {
  auto names = base_.ListDir(path);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    const std::string child_path = absl::StrCat(path, "/", name);
    struct stat st {};
    if (::lstat(child_path.c_str(), &st) != 0) {
      return SyscallError(errno, absl::StrCat("lstat ", child_path));
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) continue;  // not modeled
    const NodeId child = NewNode(S_ISDIR(st.st_mode));
    nodes_[id].entries[name] = child;
    nodes_[id].durable_entries[name] = child;
    absl::Status s =
        S_ISDIR(st.st_mode) ? Scan(child_path, child) : SnapshotFile(child_path, child);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> FaultInjectionFileSystem::Open(const std::string& path, int flags,
                                                        mode_t mode) {
  absl::MutexLock lock(&mu_);
  auto fd = base_.Open(path, flags, mode);
  if (!fd.ok() || (flags & O_DIRECTORY) != 0) return fd;
  if (std::optional<Place> place = Locate(path); place.has_value()) {
    auto& entries = nodes_[place->parent].entries;
    if (auto it = entries.find(place->name); it == entries.end()) {
      const NodeId added = NewNode(/*is_dir=*/false);
      nodes_[place->parent].entries[place->name] = added;
    } else if ((flags & O_ACCMODE) != O_RDONLY) {
      nodes_[it->second].writeback_lost = false;  // written again: new dirty pages
    }
  }
  return fd;
}

absl::Status FaultInjectionFileSystem::Rename(const std::string& from, const std::string& to) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = base_.Rename(from, to); !s.ok()) return s;
  std::optional<NodeId> moved;
  if (std::optional<Place> source = Locate(from); source.has_value()) {
    auto& entries = nodes_[source->parent].entries;
    if (auto it = entries.find(source->name); it != entries.end()) {
      moved = it->second;
      entries.erase(it);
    }
  }
  if (std::optional<Place> target = Locate(to); target.has_value()) {
    if (!moved.has_value()) {  // came from outside the model
      struct stat st {};
      moved = NewNode(::lstat(to.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
    }
    nodes_[target->parent].entries[target->name] = *moved;
  }
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::Unlink(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = base_.Unlink(path); !s.ok()) return s;
  if (std::optional<Place> place = Locate(path); place.has_value()) {
    nodes_[place->parent].entries.erase(place->name);
  }
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::MakeDir(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = base_.MakeDir(path); !s.ok()) return s;
  if (std::optional<Place> place = Locate(path); place.has_value()) {
    const NodeId added = NewNode(/*is_dir=*/true);
    nodes_[place->parent].entries[place->name] = added;
  }
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::RemoveDir(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = base_.RemoveDir(path); !s.ok()) return s;
  if (std::optional<Place> place = Locate(path); place.has_value()) {
    nodes_[place->parent].entries.erase(place->name);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FaultInjectionFileSystem::ListDir(
    const std::string& path) {
  absl::MutexLock lock(&mu_);
  return base_.ListDir(path);
}

absl::StatusOr<struct stat> FaultInjectionFileSystem::Stat(const std::string& path) {
  absl::MutexLock lock(&mu_);
  return base_.Stat(path);
}

absl::StatusOr<struct statvfs> FaultInjectionFileSystem::StatFileSystem(const std::string& path) {
  absl::MutexLock lock(&mu_);
  return base_.StatFileSystem(path);
}

absl::Status FaultInjectionFileSystem::SyncFiles(Ring& ring, absl::Span<const std::string> paths) {
  absl::MutexLock lock(&mu_);
  if (writeback_error_ != 0) {
    return FailWriteback(paths, absl::StrCat("fdatasync ", paths.empty() ? root_ : paths.front()));
  }
  if (absl::Status s = base_.SyncFiles(ring, paths); !s.ok()) return s;
  for (const std::string& path : paths) {
    std::optional<NodeId> id = Find(path);
    if (!id.has_value()) continue;  // outside root_, or removed before the sync
    if (nodes_[*id].is_dir) continue;
    if (absl::Status s = SnapshotFile(path, *id); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::SyncDir(Ring& ring, const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (writeback_error_ != 0) return FailWriteback({}, absl::StrCat("fsync ", path));
  if (absl::Status s = base_.SyncDir(ring, path); !s.ok()) return s;
  if (std::optional<NodeId> id = Find(path); id.has_value() && nodes_[*id].is_dir) {
    nodes_[*id].durable_entries = nodes_[*id].entries;
  }
  return absl::OkStatus();
}

absl::Status FaultInjectionFileSystem::SyncFileSystem(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (writeback_error_ != 0) return FailWriteback({root_}, absl::StrCat("syncfs ", path));
  if (absl::Status s = base_.SyncFileSystem(path); !s.ok()) return s;
  // syncfs covers the whole file system; the model holds only root_'s tree.
  return SnapshotTree(root_, kRoot);
}

absl::StatusOr<FaultInjectionFileSystem::DropReport> FaultInjectionFileSystem::DropUnsyncedData() {
  absl::MutexLock lock(&mu_);
  // The disk first loses everything under root_ ...
  auto names = base_.ListDir(root_);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    std::error_code error;
    std::filesystem::remove_all(absl::StrCat(root_, "/", name), error);
    if (error) {
      return ErrnoStatus(error.value(),
                         absl::StrCat("remove ", root_, "/", name, ": ", error.message()));
    }
  }
  // ... then gets back exactly the durable tree, which becomes the model.
  // Fresh node ids: a file durably named twice (a rename whose source
  // directory was not synced) comes back as two files.
  DropReport report;
  std::unordered_map<NodeId, Node> fresh;
  NodeId next = kRoot + 1;
  fresh[kRoot].is_dir = true;
  std::function<absl::Status(NodeId, NodeId, const std::string&, int)> restore =
      [&](NodeId old_dir, NodeId new_dir, const std::string& path, int depth) -> absl::Status {
    mu_.AssertHeld();  // called within this function's lock
    if (depth > kMaxDepth) {
      return ErrnoStatus(ELOOP, absl::StrCat("durable tree deeper than ", kMaxDepth, " at ", path));
    }
    for (const auto& [name, old_id] : nodes_.at(old_dir).durable_entries) {
      const Node& old = nodes_.at(old_id);
      const std::string child_path = absl::StrCat(path, "/", name);
      const NodeId id = next++;
      Node& node = fresh[id];
      node.is_dir = old.is_dir;
      fresh[new_dir].entries[name] = id;
      fresh[new_dir].durable_entries[name] = id;
      if (old.is_dir) {
        if (::mkdir(child_path.c_str(), 0755) != 0) {
          return SyscallError(errno, absl::StrCat("mkdir ", child_path, " to restore it"));
        }
        ++report.dirs;
        if (absl::Status s = restore(old_id, id, child_path, depth + 1); !s.ok()) return s;
      } else {
        if (!old.durable_data.has_value()) ++report.never_synced;
        node.durable_data = old.durable_data.value_or("");
        if (absl::Status s = WriteWhole(child_path, *node.durable_data); !s.ok()) return s;
        ++report.files;
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status s = restore(kRoot, kRoot, root_, 0); !s.ok()) return s;
  nodes_ = std::move(fresh);
  next_id_ = next;
  return report;
}

}  // namespace ckptfs::storage
