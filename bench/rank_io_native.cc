// NativeRankIo (rank_io.h): libckptfs calls under a root inside the
// filesystem. A handle indexes the RankIo's table of open client::Files and
// their positions; namespace calls walk paths with Client::LookupPath.
#include <fcntl.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "bench/rank_io.h"
#include "client/client.h"
#include "client/file.h"
#include "common/errno_status.h"

namespace ckptfs::bench {
namespace {

// Adds `context` in front of a failed status's message, keeping its errno.
absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  const int err = ErrnoFromStatus(status);
  return ErrnoStatusWithCode(status.code(), err > 0 ? err : EIO,
                             absl::StrCat(context, ": ", status.message()));
}

class NativeRankIo : public RankIo {
 public:
  NativeRankIo(client::Client* client, std::string root) : client_(client) {
    while (!root.empty() && root.back() == '/') root.pop_back();
    while (!root.empty() && root.front() == '/') root.erase(root.begin());
    root_ = "/" + root;
  }

  ~NativeRankIo() override {
    for (auto& [handle, open] : open_) open.file->Close().IgnoreError();
  }

  absl::StatusOr<int> Create(absl::string_view path) override {
    return Open(path, O_WRONLY | O_CREAT | O_TRUNC, "create");
  }

  absl::StatusOr<int> OpenRead(absl::string_view path) override {
    return Open(path, O_RDONLY, "open");
  }

  absl::Status Write(int handle, const void* data, size_t size) override {
    OpenFile* open = Find(handle);
    if (open == nullptr) return BadHandle(handle);
    absl::StatusOr<size_t> n = open->file->Write(open->position, data, size);
    if (!n.ok()) return WithContext(n.status(), absl::StrCat("write ", open->path));
    open->position += *n;
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Read(int handle, void* data, size_t size) override {
    OpenFile* open = Find(handle);
    if (open == nullptr) return BadHandle(handle);
    absl::StatusOr<size_t> n = open->file->Read(open->position, data, size);
    if (!n.ok()) return WithContext(n.status(), absl::StrCat("read ", open->path));
    open->position += *n;
    return *n;
  }

  absl::Status Fsync(int handle) override {
    OpenFile* open = Find(handle);
    if (open == nullptr) return BadHandle(handle);
    return WithContext(open->file->Fsync(), absl::StrCat("fsync ", open->path));
  }

  absl::Status Close(int handle) override {
    auto it = open_.find(handle);
    if (it == open_.end()) return BadHandle(handle);
    OpenFile open = std::move(it->second);
    open_.erase(it);
    return WithContext(open.file->Close(), absl::StrCat("close ", open.path));
  }

  absl::Status Rename(absl::string_view from, absl::string_view to) override {
    const std::string a = Full(from);
    const std::string b = Full(to);
    const std::string context = absl::StrCat("rename ", a, " to ", b);
    absl::StatusOr<Parent> pa = ParentOf(a);
    if (!pa.ok()) return WithContext(pa.status(), context);
    absl::StatusOr<Parent> pb = ParentOf(b);
    if (!pb.ok()) return WithContext(pb.status(), context);
    return WithContext(client_->Rename(pa->ino, pa->name, pb->ino, pb->name, false), context);
  }

  absl::Status Unlink(absl::string_view path) override {
    const std::string full = Full(path);
    absl::StatusOr<Parent> parent = ParentOf(full);
    if (!parent.ok()) return WithContext(parent.status(), absl::StrCat("unlink ", full));
    return WithContext(client_->Unlink(parent->ino, parent->name), absl::StrCat("unlink ", full));
  }

  absl::Status MakeDirs(absl::string_view path) override {
    const std::string full = Full(path);
    return WithContext(client_->MkdirAll(full, 0755).status(), absl::StrCat("mkdir ", full));
  }

  absl::Status RemoveTree(absl::string_view path) override {
    const std::string full = Full(path);
    absl::StatusOr<meta::Attr> attr = client_->LookupPath(full);
    if (!attr.ok()) {
      if (IsGone(attr.status())) return absl::OkStatus();
      return WithContext(attr.status(), absl::StrCat("remove ", full));
    }
    if (attr->type() == meta::DIRECTORY) {
      if (absl::Status status = EmptyDirectory(attr->ino(), full); !status.ok()) return status;
    }
    absl::StatusOr<Parent> parent = ParentOf(full);
    if (!parent.ok()) return WithContext(parent.status(), absl::StrCat("remove ", full));
    if (parent->name.empty()) return absl::OkStatus();  // the filesystem's root stays
    absl::Status status = attr->type() == meta::DIRECTORY
                              ? client_->Rmdir(parent->ino, parent->name)
                              : client_->Unlink(parent->ino, parent->name);
    if (!status.ok() && !IsGone(status)) {
      return WithContext(status, absl::StrCat("remove ", full));
    }
    return absl::OkStatus();
  }

  absl::Status SetXattr(absl::string_view path, absl::string_view name,
                        absl::string_view value) override {
    const std::string full = Full(path);
    const std::string context = absl::StrCat("setxattr ", name, " on ", full);
    absl::StatusOr<meta::Attr> attr = client_->LookupPath(full);
    if (!attr.ok()) return WithContext(attr.status(), context);
    return WithContext(client_->SetXattr(attr->ino(), name, value, 0), context);
  }

  absl::StatusOr<std::string> GetXattr(absl::string_view path, absl::string_view name) override {
    const std::string full = Full(path);
    const std::string context = absl::StrCat("getxattr ", name, " on ", full);
    absl::StatusOr<meta::Attr> attr = client_->LookupPath(full);
    if (!attr.ok()) return WithContext(attr.status(), context);
    absl::StatusOr<std::string> value = client_->GetXattr(attr->ino(), name);
    if (!value.ok()) return WithContext(value.status(), context);
    return value;
  }

 private:
  struct OpenFile {
    std::unique_ptr<client::File> file;
    uint64_t position = 0;
    std::string path;
  };
  struct Parent {
    uint64_t ino = 0;
    std::string name;  // "" for the root
  };

  std::string Full(absl::string_view path) const {
    while (!path.empty() && path.front() == '/') path.remove_prefix(1);
    if (path.empty()) return root_;
    return root_ == "/" ? absl::StrCat("/", path) : absl::StrCat(root_, "/", path);
  }

  absl::StatusOr<Parent> ParentOf(absl::string_view full) {
    while (full.size() > 1 && full.back() == '/') full.remove_suffix(1);
    const size_t slash = full.find_last_of('/');
    Parent parent;
    parent.name = std::string(full.substr(slash + 1));
    absl::string_view dir = full.substr(0, slash);
    absl::StatusOr<meta::Attr> attr = client_->LookupPath(dir.empty() ? "/" : dir);
    if (!attr.ok()) return attr.status();
    parent.ino = attr->ino();
    return parent;
  }

  OpenFile* Find(int handle) {
    auto it = open_.find(handle);
    return it == open_.end() ? nullptr : &it->second;
  }

  static absl::Status BadHandle(int handle) {
    return ErrnoStatus(EBADF, absl::StrCat("unknown handle ", handle));
  }

  absl::StatusOr<int> Open(absl::string_view path, int flags, absl::string_view what) {
    std::string full = Full(path);
    absl::StatusOr<std::unique_ptr<client::File>> file = client_->OpenPath(full, flags, 0644);
    if (!file.ok()) return WithContext(file.status(), absl::StrCat(what, " ", full));
    const int handle = next_handle_++;
    open_.emplace(handle, OpenFile{*std::move(file), 0, std::move(full)});
    return handle;
  }

  // Removes everything inside directory `ino` (at `full`).
  absl::Status EmptyDirectory(uint64_t ino, const std::string& full) {
    std::vector<meta::DirEntry> entries;
    std::string after;
    while (true) {
      absl::StatusOr<meta::ReadDirReply> page = client_->ReadDir(ino, after, 0);
      if (!page.ok()) return WithContext(page.status(), absl::StrCat("readdir ", full));
      for (const meta::DirEntry& entry : page->entries()) {
        if (entry.name() == "." || entry.name() == "..") continue;
        entries.push_back(entry);
      }
      if (!page->more() || page->entries().empty()) break;
      after = page->entries(page->entries_size() - 1).name();
    }
    for (const meta::DirEntry& entry : entries) {
      const std::string child = absl::StrCat(full == "/" ? "" : full, "/", entry.name());
      absl::Status status;
      if (entry.type() == meta::DIRECTORY) {
        status = EmptyDirectory(entry.ino(), child);
        if (status.ok()) status = client_->Rmdir(ino, entry.name());
      } else {
        status = client_->Unlink(ino, entry.name());
      }
      if (!status.ok() && !IsGone(status)) {
        return WithContext(status, absl::StrCat("remove ", child));
      }
    }
    return absl::OkStatus();
  }

  client::Client* const client_;
  std::string root_;  // "/" or "/a/b"
  absl::flat_hash_map<int, OpenFile> open_;
  int next_handle_ = 1;
};

}  // namespace

std::unique_ptr<RankIo> MakeNativeRankIo(client::Client* client, std::string root) {
  return std::make_unique<NativeRankIo>(client, std::move(root));
}

}  // namespace ckptfs::bench
