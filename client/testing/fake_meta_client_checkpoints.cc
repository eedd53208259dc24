// FakeMetaClient's checkpoint transactions (see fake_meta_client.h): the
// five checkpoint RPCs and the helpers the namespace operations use to keep
// committed and aborted checkpoints read-only.
#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/checkpoint_xattr_parsing.h"
#include "client/testing/fake_meta_client.h"
#include "common/entry_name.h"
#include "common/errno_status.h"

namespace ckptfs::client::testing {
namespace {

constexpr char kLatestName[] = "latest";
constexpr uint32_t kDefaultWaitMs = 10000;

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// A positive decimal of a stored xattr, or 0.
uint64_t PositiveDecimal(absl::string_view value) {
  uint64_t parsed = 0;
  if (value.empty() ||
      !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return 0;
  }
  if (!absl::SimpleAtoi(value, &parsed)) return 0;
  return parsed;
}

}  // namespace

int FakeMetaClient::WaitingCommits() const {
  absl::MutexLock lock(&mu_);
  int waiting = waiting_commits_;
  for (const auto& [ino, inode] : inodes_) {
    if (inode.checkpoint.has_value() && inode.checkpoint->info.state() == meta::PENDING) {
      waiting += static_cast<int>(inode.checkpoint->arrived_no_wait.size());
    }
  }
  return waiting;
}

FakeMetaClient::CommitCounts FakeMetaClient::CommitCheckpointCounts() const {
  absl::MutexLock lock(&mu_);
  return CommitCounts{long_polls_, no_wait_commits_, long_polls_peak_};
}

void FakeMetaClient::set_default_commit_timeout_s(uint32_t seconds) {
  absl::MutexLock lock(&mu_);
  default_commit_timeout_s_ = seconds;
}

// --- Helpers of the namespace operations -------------------------------------

uint64_t FakeMetaClient::CheckpointOf(uint64_t ino) {
  auto it = inodes_.find(ino);
  if (it == inodes_.end()) return 0;
  if (it->second.checkpoint.has_value()) return ino;
  return it->second.in_checkpoint;
}

uint64_t FakeMetaClient::InheritedCheckpoint(uint64_t parent) { return CheckpointOf(parent); }

absl::Status FakeMetaClient::RequireMutable(uint64_t ino, absl::string_view op) {
  const uint64_t ckpt = CheckpointOf(ino);
  if (ckpt == 0) return absl::OkStatus();
  auto it = inodes_.find(ckpt);
  if (it == inodes_.end() || !it->second.checkpoint.has_value()) return absl::OkStatus();
  const meta::CheckpointState state = it->second.checkpoint->info.state();
  if (state == meta::PENDING) return absl::OkStatus();
  return ErrnoStatus(EROFS, absl::StrCat(op, ": inode ", ino, " is in ", CheckpointStateName(state),
                                         " checkpoint ", ckpt));
}

void FakeMetaClient::MarkSubtree(uint64_t dir, uint64_t checkpoint) {
  for (const auto& [name, child] : inodes_.at(dir).entries) {
    Inode& inode = inodes_.at(child);
    inode.in_checkpoint = checkpoint;
    if (inode.attr.type() == meta::DIRECTORY) MarkSubtree(child, checkpoint);
  }
}

absl::Status FakeMetaClient::CheckStoredXattr(absl::string_view name, absl::string_view value,
                                              bool removing) {
  if (!absl::StartsWith(name, kCkptfsXattrPrefix) || name == kChunkSizeXattr) {
    return absl::OkStatus();
  }
  if (name != kCommitTimeoutXattr && name != kKeepXattr) {
    return ErrnoStatus(EINVAL, absl::StrCat(name, " is reserved"));
  }
  if (!removing && PositiveDecimal(value) == 0) {
    return ErrnoStatus(EINVAL, absl::StrCat(name, " must be a positive decimal number"));
  }
  return absl::OkStatus();
}

void FakeMetaClient::ListFiles(uint64_t dir, const std::string& prefix,
                               std::vector<std::pair<std::string, uint64_t>>* out) {
  for (const auto& [name, child] : inodes_.at(dir).entries) {
    const Inode& inode = inodes_.at(child);
    const std::string path = prefix.empty() ? name : absl::StrCat(prefix, "/", name);
    if (inode.attr.type() == meta::DIRECTORY) {
      ListFiles(child, path, out);
    } else if (inode.attr.type() == meta::REGULAR) {
      out->emplace_back(path, child);
    }
  }
}

meta::CheckpointInfo FakeMetaClient::ServeInfo(uint64_t ino) {
  const Inode& dir = inodes_.at(ino);
  meta::CheckpointInfo info = dir.checkpoint->info;
  info.set_arrived(static_cast<uint32_t>(dir.checkpoint->arrived.size()));
  auto parent = inodes_.find(dir.parent);
  if (parent != inodes_.end()) {
    for (const auto& [name, child] : parent->second.entries) {
      if (child == ino) info.set_name(name);
    }
  }
  return info;
}

void FakeMetaClient::ClearSubtree(uint64_t dir) {
  Inode& inode = inodes_.at(dir);
  std::map<std::string, uint64_t> entries;
  entries.swap(inode.entries);
  inode.attr.set_nlink(2);
  for (const auto& [name, child] : entries) {
    if (inodes_.at(child).attr.type() == meta::DIRECTORY) {
      ClearSubtree(child);
      inodes_.erase(child);
    } else {
      DropLink(child);
    }
  }
}

void FakeMetaClient::AbortLocked(uint64_t ckpt, int err, const std::string& reason) {
  Inode& dir = inodes_.at(ckpt);
  meta::CheckpointInfo& info = dir.checkpoint->info;
  if (info.state() != meta::PENDING) return;
  info.set_state(meta::ABORTED);
  info.set_abort_errno(err);
  info.set_abort_reason(reason);
  info.set_ended_ms(NowMs());
  ClearSubtree(ckpt);
  checkpoint_changed_.SignalAll();
}

void FakeMetaClient::ExpireLocked(uint64_t ckpt) {
  auto it = inodes_.find(ckpt);
  if (it == inodes_.end() || !it->second.checkpoint.has_value()) return;
  const Checkpoint& checkpoint = *it->second.checkpoint;
  const meta::CheckpointInfo& info = checkpoint.info;
  if (info.state() != meta::PENDING || info.first_commit_ms() == 0) return;
  if (NowMs() < info.first_commit_ms() + int64_t{info.timeout_s()} * 1000) return;
  std::vector<uint32_t> missing;
  for (uint32_t rank = 0; rank < info.ranks() && missing.size() < 8; ++rank) {
    if (checkpoint.arrived.count(rank) == 0) missing.push_back(rank);
  }
  AbortLocked(ckpt, ETIMEDOUT,
              absl::StrCat("ranks ", absl::StrJoin(missing, ","), " did not commit within ",
                           info.timeout_s(), " s of the first commit"));
}

void FakeMetaClient::FinishLocked(uint64_t ckpt) {
  Inode& dir = inodes_.at(ckpt);
  if (dir.checkpoint->info.state() != meta::PENDING ||
      dir.checkpoint->arrived.size() < dir.checkpoint->info.ranks()) {
    return;
  }
  std::vector<std::pair<std::string, uint64_t>> files;
  ListFiles(ckpt, "", &files);
  uint64_t bytes = 0;
  for (const auto& [path, ino] : files) {
    const Inode& file = inodes_.at(ino);
    if (!file.writers.empty()) {
      return AbortLocked(ckpt, EBUSY, absl::StrCat(path, " is still open for writing"));
    }
    if (file.damaged) {
      return AbortLocked(ckpt, EIO, absl::StrCat(path, ": a write of it failed"));
    }
    bytes += file.attr.size();
  }
  meta::CheckpointInfo& info = dir.checkpoint->info;
  info.set_state(meta::COMMITTED);
  info.set_ended_ms(NowMs());
  info.set_files(files.size());
  info.set_bytes(bytes);
  const uint64_t run = dir.parent;
  UpdateLatestLocked(run);
  // Retention: the K newest committed stay, older and aborted ones go.
  auto keep = inodes_.at(run).xattrs.find(kKeepXattr);
  if (keep != inodes_.at(run).xattrs.end() && PositiveDecimal(keep->second) > 0) {
    std::vector<std::pair<int64_t, std::string>> committed;
    std::vector<std::string> doomed;
    for (const auto& [name, child] : inodes_.at(run).entries) {
      const Inode& inode = inodes_.at(child);
      if (!inode.checkpoint.has_value()) continue;
      if (inode.checkpoint->info.state() == meta::COMMITTED) {
        committed.emplace_back(inode.checkpoint->info.ended_ms(), name);
      } else if (inode.checkpoint->info.state() == meta::ABORTED) {
        doomed.push_back(name);
      }
    }
    std::sort(committed.rbegin(), committed.rend());
    for (size_t i = PositiveDecimal(keep->second); i < committed.size(); ++i) {
      doomed.push_back(committed[i].second);
    }
    for (const std::string& name : doomed) RemoveCheckpointLocked(run, name);
  }
  checkpoint_changed_.SignalAll();
}

void FakeMetaClient::FileFailedLocked(uint64_t ino) {
  const uint64_t ckpt = CheckpointOf(ino);
  if (ckpt == 0 || ckpt == ino) return;
  std::vector<std::pair<std::string, uint64_t>> files;
  ListFiles(ckpt, "", &files);
  std::string path = absl::StrCat("inode ", ino);
  for (const auto& [p, i] : files) {
    if (i == ino) path = p;
  }
  if (inodes_.at(ckpt).checkpoint->info.state() == meta::PENDING) {
    AbortLocked(ckpt, EIO, absl::StrCat(path, ": a write of it failed"));
  }
}

std::string FakeMetaClient::NewestCommittedLocked(uint64_t run) {
  std::pair<int64_t, std::string> newest{-1, ""};
  for (const auto& [name, child] : inodes_.at(run).entries) {
    const Inode& inode = inodes_.at(child);
    if (!inode.checkpoint.has_value() || inode.checkpoint->info.state() != meta::COMMITTED) {
      continue;
    }
    newest = std::max(newest, std::make_pair(inode.checkpoint->info.ended_ms(), name));
  }
  return newest.second;
}

void FakeMetaClient::UpdateLatestLocked(uint64_t run) {
  const std::string newest = NewestCommittedLocked(run);
  Inode& dir = inodes_.at(run);
  auto existing = dir.entries.find(kLatestName);
  if (existing != dir.entries.end()) {
    Inode& link = inodes_.at(existing->second);
    if (link.attr.type() != meta::SYMLINK) return;  // not ours: left alone
    if (newest.empty()) {
      const uint64_t ino = existing->second;
      dir.entries.erase(existing);
      DropLink(ino);
      return;
    }
    link.target = newest;
    link.attr.set_size(newest.size());
    return;
  }
  if (newest.empty()) return;
  const uint64_t in_checkpoint = InheritedCheckpoint(run);
  Inode& link = NewInode(meta::SYMLINK, 0777, 0, 0);
  link.in_checkpoint = in_checkpoint;
  link.target = newest;
  link.attr.set_size(newest.size());
  inodes_.at(run).entries[kLatestName] = link.attr.ino();
}

void FakeMetaClient::RemoveCheckpointLocked(uint64_t run, const std::string& name) {
  Inode& dir = inodes_.at(run);
  auto it = dir.entries.find(name);
  if (it == dir.entries.end()) return;
  const uint64_t ckpt = it->second;
  ClearSubtree(ckpt);
  inodes_.erase(ckpt);
  Inode& run_dir = inodes_.at(run);
  run_dir.entries.erase(name);
  run_dir.attr.set_nlink(run_dir.attr.nlink() - 1);
  UpdateLatestLocked(run);
  checkpoint_changed_.SignalAll();
}

// --- The RPCs ----------------------------------------------------------------

absl::StatusOr<meta::CheckpointInfo> FakeMetaClient::DeclareCheckpoint(
    const meta::DeclareCheckpointRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("DeclareCheckpoint"); !s.ok()) return s;
  auto dir = FindDir(request.ino());
  if (!dir.ok()) return dir.status();
  if (request.ino() == 1) return ErrnoStatus(EINVAL, "the root cannot be a checkpoint");
  if (request.ranks() < 1 || request.ranks() > kMaxCheckpointRanks) {
    return ErrnoStatus(EINVAL, absl::StrCat("ranks must be 1..", kMaxCheckpointRanks));
  }
  if ((*dir)->checkpoint.has_value()) {
    if ((*dir)->checkpoint->info.ranks() != request.ranks()) {
      return ErrnoStatus(EINVAL, absl::StrCat("already declared with ",
                                              (*dir)->checkpoint->info.ranks(), " ranks"));
    }
    return ServeInfo(request.ino());
  }
  if ((*dir)->in_checkpoint != 0) {
    return ErrnoStatus(EINVAL, absl::StrCat("inside checkpoint ", (*dir)->in_checkpoint));
  }
  uint32_t timeout_s = request.timeout_s();
  for (uint64_t ino : {request.ino(), (*dir)->parent}) {
    if (timeout_s != 0) break;
    auto it = inodes_.find(ino);
    if (it == inodes_.end()) continue;
    auto xattr = it->second.xattrs.find(kCommitTimeoutXattr);
    if (xattr != it->second.xattrs.end()) {
      timeout_s = static_cast<uint32_t>(PositiveDecimal(xattr->second));
    }
  }
  if (timeout_s == 0) timeout_s = default_commit_timeout_s_;
  Checkpoint checkpoint;
  checkpoint.info.set_ino(request.ino());
  checkpoint.info.set_state(meta::PENDING);
  checkpoint.info.set_ranks(request.ranks());
  checkpoint.info.set_declared_ms(NowMs());
  checkpoint.info.set_timeout_s(timeout_s);
  (*dir)->checkpoint = std::move(checkpoint);
  MarkSubtree(request.ino(), request.ino());
  return ServeInfo(request.ino());
}

absl::StatusOr<meta::CheckpointInfo> FakeMetaClient::CommitCheckpoint(
    const meta::CommitCheckpointRequest& request, Cancellation* cancel) {
  // Registered before mu_ is taken: the callback takes mu_ itself.
  Cancellation::OnCancel on_cancel(cancel, [this] {
    absl::MutexLock lock(&mu_);
    checkpoint_changed_.SignalAll();
  });
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("CommitCheckpoint"); !s.ok()) return s;
  const uint64_t ino = request.ino();
  {
    auto dir = FindDir(ino);
    if (!dir.ok()) return dir.status();
    if (!(*dir)->checkpoint.has_value()) {
      return ErrnoStatus(EINVAL, absl::StrCat("inode ", ino, " is not a declared checkpoint"));
    }
    const meta::CheckpointInfo& info = (*dir)->checkpoint->info;
    if (request.rank() >= info.ranks()) {
      return ErrnoStatus(EINVAL, absl::StrCat("rank ", request.rank(), " of a checkpoint of ",
                                              info.ranks(), " ranks"));
    }
    ExpireLocked(ino);
    if (info.state() == meta::PENDING) {
      (*dir)->checkpoint->arrived.insert(request.rank());
      if (info.first_commit_ms() == 0) (*dir)->checkpoint->info.set_first_commit_ms(NowMs());
      checkpoint_changed_.SignalAll();
      FinishLocked(ino);
    }
  }
  Checkpoint& checkpoint = *inodes_.at(ino).checkpoint;
  if (request.no_wait()) {
    ++no_wait_commits_;
    const meta::CheckpointInfo& info = checkpoint.info;
    if (info.state() == meta::ABORTED) {
      return ErrnoStatus(info.abort_errno() > 0 ? info.abort_errno() : EIO, info.abort_reason());
    }
    if (info.state() == meta::PENDING) checkpoint.arrived_no_wait.insert(request.rank());
    return ServeInfo(ino);
  }
  checkpoint.arrived_no_wait.erase(request.rank());
  ++long_polls_;
  ++long_polls_in_flight_;
  long_polls_peak_ = std::max(long_polls_peak_, long_polls_in_flight_);
  struct InFlight {
    int* count;
    ~InFlight() { --*count; }
  } in_flight{&long_polls_in_flight_};
  const absl::Time poll_end =
      absl::Now() + absl::Milliseconds(request.wait_ms() != 0 ? request.wait_ms() : kDefaultWaitMs);
  while (true) {
    auto it = inodes_.find(ino);
    if (it == inodes_.end() || !it->second.checkpoint.has_value()) {
      return ErrnoStatus(ENOENT, absl::StrCat("checkpoint ", ino, " was removed"));
    }
    const meta::CheckpointInfo& info = it->second.checkpoint->info;
    if (info.state() == meta::ABORTED) {
      return ErrnoStatus(info.abort_errno() > 0 ? info.abort_errno() : EIO, info.abort_reason());
    }
    if (info.state() == meta::COMMITTED) return ServeInfo(ino);
    if (cancel != nullptr && cancel->cancelled()) {
      return ErrnoStatus(ECANCELED, "commit poll cancelled");
    }
    const absl::Time expiry =
        absl::FromUnixMillis(info.first_commit_ms() + int64_t{info.timeout_s()} * 1000);
    const absl::Time now = absl::Now();
    if (now >= poll_end) return ServeInfo(ino);
    ++waiting_commits_;
    checkpoint_changed_.WaitWithDeadline(&mu_, std::min(poll_end, expiry + absl::Milliseconds(1)));
    --waiting_commits_;
    ExpireLocked(ino);
  }
}

absl::StatusOr<meta::CheckpointInfo> FakeMetaClient::GetCheckpoint(
    const meta::InodeRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("GetCheckpoint"); !s.ok()) return s;
  auto dir = FindDir(request.ino());
  if (!dir.ok()) return dir.status();
  if (!(*dir)->checkpoint.has_value()) {
    return ErrnoStatus(EINVAL, absl::StrCat("inode ", request.ino(), " is not a checkpoint"));
  }
  ExpireLocked(request.ino());
  return ServeInfo(request.ino());
}

absl::StatusOr<meta::ListCheckpointsReply> FakeMetaClient::ListCheckpoints(
    const meta::InodeRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("ListCheckpoints"); !s.ok()) return s;
  auto dir = FindDir(request.ino());
  if (!dir.ok()) return dir.status();
  std::vector<uint64_t> children;
  for (const auto& [name, child] : (*dir)->entries) {
    if (inodes_.at(child).checkpoint.has_value()) children.push_back(child);
  }
  meta::ListCheckpointsReply reply;
  for (uint64_t child : children) {
    ExpireLocked(child);
    *reply.add_checkpoints() = ServeInfo(child);
  }
  reply.set_latest(NewestCommittedLocked(request.ino()));
  return reply;
}

absl::StatusOr<meta::Empty> FakeMetaClient::RemoveCheckpoint(
    const meta::RemoveCheckpointRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Enter("RemoveCheckpoint"); !s.ok()) return s;
  if (absl::Status s = ValidateName(request.name()); !s.ok()) return s;
  auto dir = FindDir(request.parent());
  if (!dir.ok()) return dir.status();
  auto it = (*dir)->entries.find(request.name());
  if (it == (*dir)->entries.end()) return ErrnoStatus(ENOENT, request.name());
  if (!inodes_.at(it->second).checkpoint.has_value()) {
    return ErrnoStatus(EINVAL, absl::StrCat(request.name(), " is not a checkpoint"));
  }
  if (request.expected_ino() != 0 &&
      (it->second != request.expected_ino() ||
       (request.expected_state() != meta::CHECKPOINT_STATE_UNSPECIFIED &&
        inodes_.at(it->second).checkpoint->info.state() != request.expected_state()))) {
    return ErrnoStatus(ESTALE,
                       absl::StrCat(request.name(), " is no longer the checkpoint to remove"));
  }
  RemoveCheckpointLocked(request.parent(), request.name());
  return meta::Empty();
}

}  // namespace ckptfs::client::testing
