// Client's file calls (client.h, "Files"): Create and Open, with O_TRUNC
// done storage first (TRIM every server of the stripe set, then tell the
// metadata service), and the ClientImpl helpers behind them.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/client_impl.h"
#include "client/layout.h"
#include "client/stripe_ops.h"
#include "common/errno_status.h"
#include "common/names.h"

namespace ckptfs::client {

absl::Status RequireRegular(const meta::Attr& attr) {
  if (attr.type() == meta::REGULAR) return absl::OkStatus();
  if (attr.type() == meta::DIRECTORY) {
    return ErrnoStatus(EISDIR, absl::StrCat("inode ", attr.ino(), " is a directory"));
  }
  return ErrnoStatus(EINVAL, absl::StrCat("inode ", attr.ino(), " is not a regular file"));
}

absl::Status ClientImpl::TruncateStorage(const meta::Attr& attr, uint64_t new_size) {
  if (absl::Status status = RequireRegular(attr); !status.ok()) return status;
  if (std::shared_ptr<OpenFileState> state = registry_.Find(attr.ino())) {
    return state->TruncateStorage(new_size, attr.size());
  }
  if (absl::Status status = ValidateLayout(attr.layout()); !status.ok()) return status;
  return TrimStripe(*transport_, *executor_, attr.ino(), attr.layout(),
                    std::min(attr.size(), new_size));
}

ClientImpl::StateBefore ClientImpl::SnapshotState(uint64_t ino) {
  StateBefore before;
  before.state = registry_.Find(ino);
  if (before.state != nullptr) before.size_version = before.state->size_version();
  return before;
}

absl::StatusOr<std::unique_ptr<File>> ClientImpl::MakeFile(const meta::Attr& attr, int flags,
                                                           bool truncated,
                                                           const StateBefore& before) {
  if (absl::Status status = RequireRegular(attr); !status.ok()) return status;
  if (absl::Status status = ValidateLayout(attr.layout()); !status.ok()) return status;
  bool made = false;
  std::shared_ptr<OpenFileState> state = registry_.FindOrAdd(attr.ino(), [&] {
    made = true;
    return std::make_shared<OpenFileState>(services_, attr);
  });
  if (!made) {
    if (truncated) state->SetSize(attr.size());
    std::optional<uint64_t> version_before;
    if (state == before.state && !truncated) version_before = before.size_version;
    state->Refresh(attr, version_before);
  }
  return std::make_unique<File>(std::move(state), flags);
}

absl::StatusOr<Client::Created> Client::Create(uint64_t parent, absl::string_view name,
                                               uint32_t mode, uint32_t uid, uint32_t gid,
                                               int flags) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  meta::CreateRequest request;
  request.set_parent(parent);
  request.set_name(std::string(name));
  request.set_mode(mode);
  request.set_uid(uid);
  request.set_gid(gid);
  request.set_exclusive((flags & O_EXCL) != 0);
  request.set_truncate(false);  // storage must be trimmed before the service truncates
  auto reply = impl_->meta().Create(request);
  if (!reply.ok()) return reply.status();
  Created created;
  created.created = reply->created();
  meta::Attr attr = reply->attr();
  bool truncated = false;
  // Trimmed even when the file looks empty: chunks a crashed writer left
  // behind (never committed) must not show through later partial writes.
  if (!created.created && (flags & O_TRUNC) != 0) {
    if (absl::Status status = impl_->TruncateStorage(attr, 0); !status.ok()) return status;
    meta::OpenRequest open;
    open.set_ino(attr.ino());
    open.set_truncate(true);
    auto opened = impl_->meta().Open(open);
    if (!opened.ok()) return opened.status();
    attr = opened->attr();
    truncated = true;
  }
  // The inode was unknown before the RPC: Refresh only lets the size grow.
  auto file = impl_->MakeFile(attr, flags, truncated, ClientImpl::StateBefore{});
  if (!file.ok()) return file.status();
  created.file = *std::move(file);
  created.attr = impl_->WithLocalSize(attr);
  return created;
}

absl::StatusOr<std::unique_ptr<File>> Client::Open(uint64_t ino, int flags) {
  const bool truncate = (flags & O_TRUNC) != 0;
  const ClientImpl::StateBefore before = impl_->SnapshotState(ino);
  if (truncate) {
    // The layout (and old size) come from the service; storage goes first.
    auto attr = GetAttr(ino);
    if (!attr.ok()) return attr.status();
    if (absl::Status status = impl_->TruncateStorage(*attr, 0); !status.ok()) return status;
  }
  meta::OpenRequest request;
  request.set_ino(ino);
  request.set_truncate(truncate);
  auto reply = impl_->meta().Open(request);
  if (!reply.ok()) return reply.status();
  return impl_->MakeFile(reply->attr(), flags, truncate, before);
}

}  // namespace ckptfs::client
