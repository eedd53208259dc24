// See fake_meta_client.h.
#include "client/testing/fake_meta_client.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "common/file_type.h"
#include "common/written_chunks.h"

namespace ckptfs::client::testing {
namespace {

constexpr uint32_t kDefaultReadDirLimit = 1000;

}  // namespace

FakeMetaClient::FakeMetaClient(std::vector<uint32_t> server_ids, uint32_t default_chunk_size)
    : server_ids_(std::move(server_ids)), default_chunk_size_(default_chunk_size) {
  absl::MutexLock lock(&mu_);
  Inode& root = inodes_[1];
  root.attr.set_ino(1);
  root.attr.set_type(meta::DIRECTORY);
  root.attr.set_mode(S_IFDIR | 0755);
  root.attr.set_nlink(2);
}

absl::Status FakeMetaClient::Enter(absl::string_view rpc) {
  ++calls_[std::string(rpc)];
  auto it = fail_next_.find(std::string(rpc));
  if (it == fail_next_.end()) return absl::OkStatus();
  absl::Status status = it->second.status;
  if (--it->second.times <= 0) fail_next_.erase(it);
  return status;
}

int FakeMetaClient::Calls(absl::string_view rpc) const {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(std::string(rpc));
  return it == calls_.end() ? 0 : it->second;
}

void FakeMetaClient::FailNext(absl::string_view rpc, absl::Status status, int times) {
  absl::MutexLock lock(&mu_);
  if (times <= 0) {
    fail_next_.erase(std::string(rpc));
    return;
  }
  fail_next_[std::string(rpc)] = Failure{std::move(status), times};
}

uint64_t FakeMetaClient::RecordedSize(uint64_t ino) const {
  absl::MutexLock lock(&mu_);
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? 0 : it->second.attr.size();
}

int FakeMetaClient::DurableCommits() const {
  absl::MutexLock lock(&mu_);
  return durable_commits_;
}

uint64_t FakeMetaClient::DurableSize(uint64_t ino) const {
  absl::MutexLock lock(&mu_);
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? 0 : it->second.durable_size;
}

std::set<uint64_t> FakeMetaClient::WriterHandles(uint64_t ino) const {
  absl::MutexLock lock(&mu_);
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? std::set<uint64_t>() : it->second.writers;
}

std::set<uint64_t> FakeMetaClient::ReaderHandles(uint64_t ino) const {
  absl::MutexLock lock(&mu_);
  auto it = inodes_.find(ino);
  return it == inodes_.end() ? std::set<uint64_t>() : it->second.readers;
}

bool FakeMetaClient::Damaged(uint64_t ino) const {
  absl::MutexLock lock(&mu_);
  auto it = inodes_.find(ino);
  return it != inodes_.end() && it->second.damaged;
}

std::vector<uint64_t> FakeMetaClient::Registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

std::vector<meta::CommitWriteRequest> FakeMetaClient::CommitWrites() const {
  absl::MutexLock lock(&mu_);
  return commit_writes_;
}

absl::StatusOr<FakeMetaClient::Inode*> FakeMetaClient::Find(uint64_t ino) {
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return ErrnoStatus(ENOENT, absl::StrCat("no inode ", ino));
  return &it->second;
}

absl::StatusOr<FakeMetaClient::Inode*> FakeMetaClient::FindDir(uint64_t ino) {
  auto inode = Find(ino);
  if (!inode.ok()) return inode.status();
  if ((*inode)->attr.type() != meta::DIRECTORY) {
    return ErrnoStatus(ENOTDIR, absl::StrCat("inode ", ino, " is not a directory"));
  }
  return inode;
}

absl::StatusOr<FakeMetaClient::Inode*> FakeMetaClient::FindParentDir(uint64_t ino) {
  auto dir = FindDir(ino);
  if (!dir.ok() && ErrnoFromStatus(dir.status()) == ENOENT) {
    return ErrnoStatus(ESTALE, absl::StrCat("directory ", ino, " no longer exists"));
  }
  return dir;
}

void FakeMetaClient::Changed(meta::Attr& attr) {
  const int64_t now = absl::GetCurrentTimeNanos();
  attr.set_ctime_ns(now > attr.ctime_ns() ? now : attr.ctime_ns() + 1);
}

FakeMetaClient::Inode& FakeMetaClient::NewInode(meta::FileType type, uint32_t mode, uint32_t uid,
                                                uint32_t gid) {
  const uint64_t ino = next_ino_++;
  Inode& inode = inodes_[ino];
  const int64_t now = absl::GetCurrentTimeNanos();
  inode.attr.set_ino(ino);
  inode.attr.set_type(type);
  inode.attr.set_mode(ModeTypeBits(type) | (mode & 07777));
  inode.attr.set_uid(uid);
  inode.attr.set_gid(gid);
  inode.attr.set_nlink(type == meta::DIRECTORY ? 2 : 1);
  inode.attr.set_atime_ns(now);
  inode.attr.set_mtime_ns(now);
  inode.attr.set_ctime_ns(now);
  return inode;
}

void FakeMetaClient::DropLink(uint64_t ino) {
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return;
  // A file with no links left stays reachable by inode, like an orphan
  // whose open handles keep reading until the reclaimer runs.
  if (it->second.attr.nlink() > 0) it->second.attr.set_nlink(it->second.attr.nlink() - 1);
}

absl::StatusOr<meta::AttrReply> FakeMetaClient::Lookup(const meta::LookupRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Lookup"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.name()); !s.ok()) return s;
  auto dir = FindParentDir(request.parent());
  if (!dir.ok()) return dir.status();
  auto it = (*dir)->entries.find(request.name());
  if (it == (*dir)->entries.end()) {
    return ErrnoStatus(ENOENT, absl::StrCat("no entry ", request.name()));
  }
  meta::AttrReply reply;
  *reply.mutable_attr() = inodes_.at(it->second).attr;
  return reply;
}

absl::StatusOr<meta::AttrReply> FakeMetaClient::GetAttr(const meta::InodeRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("GetAttr"); !s.ok()) return s;
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  meta::AttrReply reply;
  *reply.mutable_attr() = (*inode)->attr;
  if (request.with_written() && (*inode)->attr.type() == meta::REGULAR) {
    *reply.mutable_written() = (*inode)->written;
  }
  return reply;
}

absl::StatusOr<meta::AttrReply> FakeMetaClient::SetAttr(const meta::SetAttrRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("SetAttr"); !s.ok()) return s;
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  if (absl::Status s = RequireMutable(request.ino(), "setattr"); !s.ok()) return s;
  meta::Attr& attr = (*inode)->attr;
  const uint32_t valid = request.valid();
  const int64_t now = absl::GetCurrentTimeNanos();
  if (valid & meta::SET_SIZE) {
    if (attr.type() == meta::DIRECTORY) return ErrnoStatus(EISDIR, "truncate of a directory");
    attr.set_size(request.size());
    if (request.size() == 0) (*inode)->damaged = false;
    TruncateWritten((*inode)->written, request.size(), attr.layout().chunk_size());
    attr.set_mtime_ns(now);
  }
  if (valid & meta::SET_MODE) attr.set_mode((attr.mode() & ~07777u) | (request.mode() & 07777));
  if (valid & meta::KILL_SETID) attr.set_mode(ModeAfterUnprivilegedWrite(attr.mode()));
  if (valid & meta::SET_UID) attr.set_uid(request.uid());
  if (valid & meta::SET_GID) attr.set_gid(request.gid());
  if (valid & meta::SET_ATIME) attr.set_atime_ns(request.atime_ns());
  if (valid & meta::SET_MTIME) attr.set_mtime_ns(request.mtime_ns());
  if (valid & meta::SET_ATIME_NOW) attr.set_atime_ns(now);
  if (valid & meta::SET_MTIME_NOW) attr.set_mtime_ns(now);
  Changed(attr);
  meta::AttrReply reply;
  *reply.mutable_attr() = attr;
  return reply;
}

absl::StatusOr<meta::CreateReply> FakeMetaClient::Create(const meta::CreateRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Create"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.name()); !s.ok()) return s;
  auto dir = FindParentDir(request.parent());
  if (!dir.ok()) return dir.status();
  if (absl::Status s = RequireMutable(request.parent(), "create"); !s.ok()) return s;
  if (request.writer_handle() != 0) registrations_.push_back(request.writer_handle());
  meta::CreateReply reply;
  auto existing = (*dir)->entries.find(request.name());
  if (existing != (*dir)->entries.end()) {
    if (request.exclusive()) return ErrnoStatus(EEXIST, absl::StrCat(request.name(), " exists"));
    Inode& inode = inodes_.at(existing->second);
    if (inode.attr.type() == meta::DIRECTORY) {
      return ErrnoStatus(EISDIR, absl::StrCat(request.name(), " is a directory"));
    }
    if (request.truncate()) {
      inode.attr.set_size(0);
      inode.attr.set_mtime_ns(absl::GetCurrentTimeNanos());
      Changed(inode.attr);
      inode.damaged = false;
      ResetWritten(inode.written);
    }
    if (request.writer_handle() != 0) inode.writers.insert(request.writer_handle());
    *reply.mutable_attr() = inode.attr;
    reply.set_created(false);
    return reply;
  }
  uint32_t chunk_size = default_chunk_size_;
  auto xattr = (*dir)->xattrs.find(kChunkSizeXattr);
  if (xattr != (*dir)->xattrs.end()) {
    uint32_t parsed = 0;
    if (absl::SimpleAtoi(xattr->second, &parsed) && parsed > 0) chunk_size = parsed;
  }
  const uint64_t parent = request.parent();
  const uint64_t in_checkpoint = InheritedCheckpoint(parent);
  Inode& inode = NewInode(meta::REGULAR, request.mode(), request.uid(), request.gid());
  inode.in_checkpoint = in_checkpoint;
  if (request.writer_handle() != 0) inode.writers.insert(request.writer_handle());
  ResetWritten(inode.written);
  meta::Layout* layout = inode.attr.mutable_layout();
  layout->set_chunk_size(chunk_size);
  const size_t n = server_ids_.size();
  for (size_t i = 0; i < n; ++i) layout->add_stripe(server_ids_[(stripe_rotation_ + i) % n]);
  ++stripe_rotation_;
  inodes_.at(parent).entries[request.name()] = inode.attr.ino();
  *reply.mutable_attr() = inode.attr;
  reply.set_created(true);
  return reply;
}

absl::StatusOr<meta::AttrReply> FakeMetaClient::Mkdir(const meta::MkdirRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Mkdir"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.name()); !s.ok()) return s;
  auto dir = FindParentDir(request.parent());
  if (!dir.ok()) return dir.status();
  if (absl::Status s = RequireMutable(request.parent(), "mkdir"); !s.ok()) return s;
  if ((*dir)->entries.count(request.name()) > 0) {
    return ErrnoStatus(EEXIST, absl::StrCat(request.name(), " exists"));
  }
  const uint64_t parent = request.parent();
  std::optional<std::string> chunk_size;
  auto xattr = (*dir)->xattrs.find(kChunkSizeXattr);
  if (xattr != (*dir)->xattrs.end()) chunk_size = xattr->second;
  const uint64_t in_checkpoint = InheritedCheckpoint(parent);
  Inode& inode = NewInode(meta::DIRECTORY, request.mode(), request.uid(), request.gid());
  inode.parent = parent;
  inode.in_checkpoint = in_checkpoint;
  if (chunk_size.has_value()) inode.xattrs[kChunkSizeXattr] = *chunk_size;
  Inode& parent_inode = inodes_.at(parent);
  parent_inode.entries[request.name()] = inode.attr.ino();
  parent_inode.attr.set_nlink(parent_inode.attr.nlink() + 1);
  meta::AttrReply reply;
  *reply.mutable_attr() = inode.attr;
  return reply;
}

absl::StatusOr<meta::AttrReply> FakeMetaClient::Symlink(const meta::SymlinkRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Symlink"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.name()); !s.ok()) return s;
  auto dir = FindParentDir(request.parent());
  if (!dir.ok()) return dir.status();
  if (absl::Status s = RequireMutable(request.parent(), "symlink"); !s.ok()) return s;
  if ((*dir)->entries.count(request.name()) > 0) {
    return ErrnoStatus(EEXIST, absl::StrCat(request.name(), " exists"));
  }
  const uint64_t parent = request.parent();
  const uint64_t in_checkpoint = InheritedCheckpoint(parent);
  Inode& inode = NewInode(meta::SYMLINK, 0777, request.uid(), request.gid());
  inode.in_checkpoint = in_checkpoint;
  inode.target = request.target();
  inode.attr.set_size(request.target().size());
  inodes_.at(parent).entries[request.name()] = inode.attr.ino();
  meta::AttrReply reply;
  *reply.mutable_attr() = inode.attr;
  return reply;
}

absl::StatusOr<meta::AttrReply> FakeMetaClient::Mknod(const meta::MknodRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Mknod"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.name()); !s.ok()) return s;
  const std::optional<meta::FileType> type = FileTypeOfMode(request.mode());
  if (!type.has_value() || !IsSpecialFile(*type)) return ErrnoStatus(EINVAL, "not a special file");
  auto dir = FindParentDir(request.parent());
  if (!dir.ok()) return dir.status();
  if (absl::Status s = RequireMutable(request.parent(), "mknod"); !s.ok()) return s;
  if ((*dir)->entries.count(request.name()) > 0) {
    return ErrnoStatus(EEXIST, absl::StrCat(request.name(), " exists"));
  }
  const uint64_t parent = request.parent();
  const uint64_t in_checkpoint = InheritedCheckpoint(parent);
  Inode& inode = NewInode(*type, request.mode(), request.uid(), request.gid());
  inode.in_checkpoint = in_checkpoint;
  inode.attr.set_rdev(request.rdev());
  inodes_.at(parent).entries[request.name()] = inode.attr.ino();
  meta::AttrReply reply;
  *reply.mutable_attr() = inode.attr;
  return reply;
}

// Links within one checkpoint domain only (the service also lets a
// committed checkpoint's files be linked outside every checkpoint).
absl::StatusOr<meta::AttrReply> FakeMetaClient::Link(const meta::LinkRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Link"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.new_name()); !s.ok()) return s;
  auto dir = FindParentDir(request.new_parent());
  if (!dir.ok()) return dir.status();
  if (absl::Status s = RequireMutable(request.new_parent(), "link"); !s.ok()) return s;
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  if ((*inode)->attr.type() == meta::DIRECTORY) return ErrnoStatus(EPERM, "a directory");
  if ((*inode)->attr.nlink() == 0) return ErrnoStatus(ENOENT, "no name left");
  if ((*inode)->in_checkpoint != InheritedCheckpoint(request.new_parent())) {
    return ErrnoStatus(EXDEV, "across a checkpoint boundary");
  }
  if ((*dir)->entries.count(request.new_name()) > 0) {
    return ErrnoStatus(EEXIST, absl::StrCat(request.new_name(), " exists"));
  }
  (*dir)->entries[request.new_name()] = request.ino();
  (*inode)->attr.set_nlink((*inode)->attr.nlink() + 1);
  (*inode)->attr.set_ctime_ns(absl::GetCurrentTimeNanos());
  meta::AttrReply reply;
  *reply.mutable_attr() = (*inode)->attr;
  return reply;
}

absl::StatusOr<meta::ReadLinkReply> FakeMetaClient::ReadLink(const meta::InodeRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("ReadLink"); !s.ok()) return s;
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  if ((*inode)->attr.type() != meta::SYMLINK) return ErrnoStatus(EINVAL, "not a symlink");
  meta::ReadLinkReply reply;
  reply.set_target((*inode)->target);
  return reply;
}

absl::StatusOr<meta::Empty> FakeMetaClient::Unlink(const meta::LookupRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Unlink"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.name()); !s.ok()) return s;
  auto dir = FindParentDir(request.parent());
  if (!dir.ok()) return dir.status();
  if (absl::Status s = RequireMutable(request.parent(), "unlink"); !s.ok()) return s;
  auto it = (*dir)->entries.find(request.name());
  if (it == (*dir)->entries.end()) return ErrnoStatus(ENOENT, request.name());
  if (inodes_.at(it->second).attr.type() == meta::DIRECTORY) {
    return ErrnoStatus(EISDIR, absl::StrCat(request.name(), " is a directory"));
  }
  const uint64_t ino = it->second;
  (*dir)->entries.erase(it);
  DropLink(ino);
  return meta::Empty();
}

absl::StatusOr<meta::Empty> FakeMetaClient::Rmdir(const meta::LookupRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Rmdir"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.name()); !s.ok()) return s;
  auto dir = FindParentDir(request.parent());
  if (!dir.ok()) return dir.status();
  auto it = (*dir)->entries.find(request.name());
  if (it == (*dir)->entries.end()) return ErrnoStatus(ENOENT, request.name());
  Inode& victim = inodes_.at(it->second);
  if (victim.attr.type() != meta::DIRECTORY) return ErrnoStatus(ENOTDIR, request.name());
  if (absl::Status s = RequireMutable(request.parent(), "rmdir"); !s.ok()) return s;
  if (victim.checkpoint.has_value()) {
    return ErrnoStatus(
        EROFS, absl::StrCat(request.name(), " is a checkpoint: remove it with RemoveCheckpoint"));
  }
  if (!victim.entries.empty()) return ErrnoStatus(ENOTEMPTY, request.name());
  inodes_.erase(it->second);
  (*dir)->entries.erase(it);
  (*dir)->attr.set_nlink((*dir)->attr.nlink() - 1);
  return meta::Empty();
}

absl::StatusOr<meta::Empty> FakeMetaClient::Rename(const meta::RenameRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Rename"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.name()); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.new_name()); !s.ok()) return s;
  auto from = FindParentDir(request.parent());
  if (!from.ok()) return from.status();
  auto to = FindParentDir(request.new_parent());
  if (!to.ok()) return to.status();
  auto src = (*from)->entries.find(request.name());
  if (src == (*from)->entries.end()) return ErrnoStatus(ENOENT, request.name());
  const uint64_t ino = src->second;
  if (absl::Status s = RequireMutable(request.parent(), "rename"); !s.ok()) return s;
  if (absl::Status s = RequireMutable(request.new_parent(), "rename"); !s.ok()) return s;
  if (absl::Status s = RequireMutable(ino, "rename"); !s.ok()) return s;
  const bool is_dir = inodes_.at(ino).attr.type() == meta::DIRECTORY;
  auto dst = (*to)->entries.find(request.new_name());
  if (dst != (*to)->entries.end()) {
    if (dst->second == ino) return meta::Empty();
    if (request.no_replace()) return ErrnoStatus(EEXIST, request.new_name());
    Inode& target = inodes_.at(dst->second);
    const bool target_dir = target.attr.type() == meta::DIRECTORY;
    if (is_dir && !target_dir) return ErrnoStatus(ENOTDIR, request.new_name());
    if (!is_dir && target_dir) return ErrnoStatus(EISDIR, request.new_name());
    if (target_dir && !target.entries.empty()) return ErrnoStatus(ENOTEMPTY, request.new_name());
    if (target_dir) {
      inodes_.erase(dst->second);
    } else {
      DropLink(dst->second);
    }
  }
  (*from)->entries.erase(src);
  (*to)->entries[request.new_name()] = ino;
  Inode& moved = inodes_.at(ino);
  if (is_dir) moved.parent = request.new_parent();
  if (!moved.checkpoint.has_value()) {
    moved.in_checkpoint = InheritedCheckpoint(request.new_parent());
    if (is_dir) MarkSubtree(ino, moved.in_checkpoint);
  }
  return meta::Empty();
}

absl::StatusOr<meta::ReadDirReply> FakeMetaClient::ReadDir(const meta::ReadDirRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("ReadDir"); !s.ok()) return s;
  auto dir = FindDir(request.ino());
  if (!dir.ok()) return dir.status();
  const uint32_t limit = request.limit() == 0 ? kDefaultReadDirLimit : request.limit();
  meta::ReadDirReply reply;
  const auto& entries = (*dir)->entries;
  auto it =
      request.start_after().empty() ? entries.begin() : entries.upper_bound(request.start_after());
  for (; it != entries.end(); ++it) {
    const Inode& child = inodes_.at(it->second);
    // Pending and aborted checkpoints are reachable by name only.
    if (child.checkpoint.has_value() && child.checkpoint->info.state() != meta::COMMITTED) {
      continue;
    }
    if (static_cast<uint32_t>(reply.entries_size()) == limit) {
      reply.set_more(true);
      break;
    }
    meta::DirEntry* entry = reply.add_entries();
    entry->set_name(it->first);
    entry->set_ino(it->second);
    entry->set_type(child.attr.type());
  }
  return reply;
}

absl::StatusOr<meta::AttrReply> FakeMetaClient::Open(const meta::OpenRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Open"); !s.ok()) return s;
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  meta::Attr& attr = (*inode)->attr;
  if (attr.type() == meta::DIRECTORY) return ErrnoStatus(EISDIR, "open of a directory");
  if (request.truncate() || request.writer_handle() != 0) {
    if (absl::Status s = RequireMutable(request.ino(), "open for writing"); !s.ok()) return s;
  }
  if (request.writer_handle() != 0) {
    registrations_.push_back(request.writer_handle());
    (*inode)->writers.insert(request.writer_handle());
  }
  const bool held = request.reader_handle() != 0 && request.writer_handle() == 0 &&
                    !request.truncate() && attr.type() == meta::REGULAR;
  if (held) (*inode)->readers.insert(request.reader_handle());
  if (request.truncate()) (*inode)->damaged = false;
  if (request.truncate()) {
    attr.set_size(0);
    attr.set_mtime_ns(absl::GetCurrentTimeNanos());
    Changed(attr);
    ResetWritten((*inode)->written);
  }
  meta::AttrReply reply;
  *reply.mutable_attr() = attr;
  reply.set_reader_held(held);
  return reply;
}

absl::StatusOr<meta::Empty> FakeMetaClient::ReleaseReader(
    const meta::ReleaseReaderRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("ReleaseReader"); !s.ok()) return s;
  auto it = inodes_.find(request.ino());
  if (it != inodes_.end()) it->second.readers.erase(request.reader_handle());
  return meta::Empty();
}

absl::StatusOr<meta::AttrReply> FakeMetaClient::CommitWrite(
    const meta::CommitWriteRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("CommitWrite"); !s.ok()) return s;
  commit_writes_.push_back(request);
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  meta::Attr& attr = (*inode)->attr;
  if (request.size() > attr.size() || request.failed()) {
    if (absl::Status s = RequireMutable(request.ino(), "commit write"); !s.ok()) return s;
  }
  if (request.release_writer() != 0) (*inode)->writers.erase(request.release_writer());
  if (request.failed() && !(*inode)->damaged) {
    (*inode)->damaged = true;
    FileFailedLocked(request.ino());
  }
  attr.set_size(std::max(attr.size(), request.size()));
  MergeWritten((*inode)->written, request.written(), request.written_untracked(),
               ChunksCovering(attr.size(), attr.layout().chunk_size()));
  if (request.mtime_ns() != 0) attr.set_mtime_ns(request.mtime_ns());
  // Like the service, a release that wrote nothing is no change (the fake
  // keeps no ended-checkpoint rule here).
  if (request.size() != 0 || request.mtime_ns() != 0 || request.failed()) Changed(attr);
  if (request.durable()) {
    ++durable_commits_;
    (*inode)->durable_size = attr.size();
  }
  meta::AttrReply reply;
  *reply.mutable_attr() = attr;
  return reply;
}

absl::StatusOr<meta::Empty> FakeMetaClient::SetXattr(const meta::SetXattrRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("SetXattr"); !s.ok()) return s;
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  if (absl::Status s = CheckStoredXattr(request.name(), request.value(), false); !s.ok()) {
    return s;
  }
  if (absl::Status s = RequireMutable(request.ino(), "setxattr"); !s.ok()) return s;
  auto& xattrs = (*inode)->xattrs;
  const bool exists = xattrs.count(request.name()) > 0;
  if (request.create_only() && exists) return ErrnoStatus(EEXIST, request.name());
  if (request.replace_only() && !exists) return ErrnoStatus(ENODATA, request.name());
  xattrs[request.name()] = request.value();
  return meta::Empty();
}

absl::StatusOr<meta::XattrValue> FakeMetaClient::GetXattr(const meta::XattrRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("GetXattr"); !s.ok()) return s;
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  auto it = (*inode)->xattrs.find(request.name());
  if (it == (*inode)->xattrs.end()) return ErrnoStatus(ENODATA, request.name());
  meta::XattrValue reply;
  reply.set_value(it->second);
  return reply;
}

absl::StatusOr<meta::XattrNames> FakeMetaClient::ListXattr(const meta::InodeRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("ListXattr"); !s.ok()) return s;
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  meta::XattrNames reply;
  for (const auto& [name, value] : (*inode)->xattrs) reply.add_names(name);
  return reply;
}

absl::StatusOr<meta::Empty> FakeMetaClient::RemoveXattr(const meta::XattrRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("RemoveXattr"); !s.ok()) return s;
  auto inode = Find(request.ino());
  if (!inode.ok()) return inode.status();
  if (absl::Status s = CheckStoredXattr(request.name(), "", true); !s.ok()) return s;
  if (absl::Status s = RequireMutable(request.ino(), "removexattr"); !s.ok()) return s;
  if ((*inode)->xattrs.erase(request.name()) == 0) return ErrnoStatus(ENODATA, request.name());
  return meta::Empty();
}

absl::StatusOr<meta::StatFsReply> FakeMetaClient::StatFs(const meta::Empty&) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("StatFs"); !s.ok()) return s;
  meta::StatFsReply reply;
  reply.set_total_bytes(uint64_t{1} << 40);
  reply.set_free_bytes(uint64_t{1} << 39);
  reply.set_files(inodes_.size());
  reply.set_servers_up(static_cast<uint32_t>(server_ids_.size()));
  reply.set_servers_total(static_cast<uint32_t>(server_ids_.size()));
  return reply;
}

absl::StatusOr<meta::RegisterServerReply> FakeMetaClient::RegisterServer(
    const meta::RegisterServerRequest&) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("RegisterServer"); !s.ok()) return s;
  return ErrnoStatus(EOPNOTSUPP, "the fake metadata service has a fixed set of servers");
}

absl::StatusOr<meta::Empty> FakeMetaClient::Heartbeat(const meta::HeartbeatRequest&) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("Heartbeat"); !s.ok()) return s;
  return meta::Empty();
}

absl::StatusOr<meta::ListServersReply> FakeMetaClient::ListServers(const meta::Empty&) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("ListServers"); !s.ok()) return s;
  meta::ListServersReply reply;
  for (uint32_t id : server_ids_) {
    meta::ServerInfo* info = reply.add_servers();
    info->set_id(id);
    info->set_address(absl::StrCat("127.0.0.1:", 7000 + id));
    info->set_alive(true);
  }
  return reply;
}

absl::StatusOr<meta::Attr> FakeMetaClient::MoveStripeServer(uint64_t ino, uint32_t from,
                                                            uint32_t to) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("MoveStripeServer"); !s.ok()) return s;
  if (from == to) return ErrnoStatus(EINVAL, "move stripe server: from == to");
  if (std::find(server_ids_.begin(), server_ids_.end(), to) == server_ids_.end()) {
    return ErrnoStatus(EINVAL, absl::StrCat("move stripe server: no server ", to));
  }
  auto inode = Find(ino);
  if (!inode.ok()) return inode.status();
  meta::Attr& attr = (*inode)->attr;
  if (attr.type() == meta::DIRECTORY) return ErrnoStatus(EISDIR, "move stripe server");
  if (attr.type() != meta::REGULAR) return ErrnoStatus(EINVAL, "move stripe server");
  auto* stripe = attr.mutable_layout()->mutable_stripe();
  if (std::find(stripe->begin(), stripe->end(), from) == stripe->end()) {
    return ErrnoStatus(ESTALE,
                       absl::StrCat("move stripe server: no server ", from, " in the stripe"));
  }
  if (std::find(stripe->begin(), stripe->end(), to) != stripe->end()) {
    return ErrnoStatus(
        EINVAL, absl::StrCat("move stripe server: server ", to, " is in the stripe already"));
  }
  std::replace(stripe->begin(), stripe->end(), from, to);
  attr.set_ctime_ns(absl::GetCurrentTimeNanos());
  return attr;
}

absl::Status FakeMetaClient::ReportRepair(const meta::RepairReport& report) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("ReportRepair"); !s.ok()) return s;
  repair_reports_.push_back(report);
  return absl::OkStatus();
}

std::vector<meta::RepairReport> FakeMetaClient::RepairReports() const {
  absl::MutexLock lock(&mu_);
  return repair_reports_;
}

}  // namespace ckptfs::client::testing
