// Client's file calls (client.h, "Files"): Create and Open, with O_TRUNC
// done storage first (TRIM every server of the stripe set, then tell the
// metadata service), writer registration of the handles that may write,
// reader holds of the read-only ones (client/reader_hold.h), and the
// ClientImpl helpers behind them.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/client_impl.h"
#include "client/layout.h"
#include "client/stripe_ops.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "common/log.h"

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

uint64_t NewWriterHandle() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  uint64_t id = 0;
  while (id == 0) id = rng();
  return id;
}

bool MayWrite(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }

void ClientImpl::ReleaseWriter(uint64_t ino, uint64_t writer) {
  if (writer == 0) return;
  meta::CommitWriteRequest request;
  request.set_ino(ino);
  request.set_release_writer(writer);
  absl::StatusOr<meta::AttrReply> reply = meta_->CommitWrite(request);
  if (!reply.ok()) {
    CKPTFS_LOG(kWarning) << "releasing writer " << writer << " of inode " << ino << ": "
                         << reply.status();
  }
}

ClientImpl::StateBefore ClientImpl::SnapshotState(uint64_t ino) {
  StateBefore before;
  before.state = registry_.Find(ino);
  if (before.state != nullptr) before.size_version = before.state->size_version();
  return before;
}

absl::StatusOr<std::unique_ptr<File>> ClientImpl::MakeFile(const meta::Attr& attr, int flags,
                                                           bool truncated,
                                                           const StateBefore& before,
                                                           uint64_t writer_handle,
                                                           ReaderHold hold) {
  absl::Status usable = RequireRegular(attr);
  if (usable.ok()) usable = ValidateLayout(attr.layout());
  if (!usable.ok()) {
    if (attr.type() == meta::REGULAR) ReleaseWriter(attr.ino(), writer_handle);
    return usable;
  }
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
  return std::make_unique<File>(std::move(state), flags, writer_handle, attr, std::move(hold));
}

absl::StatusOr<Client::Created> Client::Create(uint64_t parent, absl::string_view name,
                                               uint32_t mode, uint32_t uid, uint32_t gid,
                                               int flags) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  const uint64_t writer = MayWrite(flags) ? NewWriterHandle() : 0;
  // O_TRUNC registers even a read-only open (under a temporary id), so that
  // the service refuses an existing file of a committed checkpoint (EROFS)
  // before any of its storage is trimmed, and a commit meanwhile sees the
  // file busy (as in Open below).
  const bool truncate = (flags & O_TRUNC) != 0;
  const uint64_t registration = writer != 0 || !truncate ? writer : NewWriterHandle();
  meta::CreateRequest request;
  request.set_parent(parent);
  request.set_name(std::string(name));
  request.set_mode(mode);
  request.set_uid(uid);
  request.set_gid(gid);
  request.set_exclusive((flags & O_EXCL) != 0);
  request.set_truncate(false);  // storage must be trimmed before the service truncates
  request.set_writer_handle(registration);
  auto reply = impl_->meta().Create(request);
  if (!reply.ok()) return reply.status();
  Created created;
  created.created = reply->created();
  meta::Attr attr = reply->attr();
  bool truncated = false;
  // Trimmed even when the file looks empty: chunks a crashed writer left
  // behind (never committed) must not show through later partial writes.
  // The service has registered the handle already (a registration is
  // refused inside a committed checkpoint), so trimming cannot hurt a
  // committed file.
  absl::Status status = absl::OkStatus();
  if (!created.created && truncate) {
    status = impl_->TruncateStorage(attr, 0);
    if (status.ok()) {
      meta::OpenRequest open;
      open.set_ino(attr.ino());
      open.set_truncate(true);
      open.set_writer_handle(registration);
      auto opened = impl_->meta().Open(open);
      if (opened.ok()) {
        attr = opened->attr();
      } else {
        status = opened.status();
      }
    }
    truncated = status.ok();
  }
  if ((!status.ok() || registration != writer) && attr.type() == meta::REGULAR) {
    impl_->ReleaseWriter(attr.ino(), registration);
  }
  if (!status.ok()) return status;
  // The inode was unknown before the RPC: Refresh only lets the size grow.
  auto file = impl_->MakeFile(attr, flags, truncated, ClientImpl::StateBefore{}, writer);
  if (!file.ok()) return file.status();
  created.file = *std::move(file);
  created.attr = impl_->WithLocalSize(attr);
  return created;
}

absl::StatusOr<std::unique_ptr<File>> Client::Open(uint64_t ino, int flags) {
  const bool truncate = (flags & O_TRUNC) != 0;
  const uint64_t writer = MayWrite(flags) ? NewWriterHandle() : 0;
  const ClientImpl::StateBefore before = impl_->SnapshotState(ino);
  meta::OpenRequest request;
  request.set_ino(ino);
  if (!truncate) {
    request.set_writer_handle(writer);
    // A reader asks the service to hold a checkpoint file for it.
    const uint64_t reader = writer == 0 ? NewWriterHandle() : 0;
    request.set_reader_handle(reader);
    auto reply = impl_->meta().Open(request);
    if (!reply.ok()) return reply.status();
    ReaderHold hold;
    if (reply->reader_held()) hold = ReaderHold(&impl_->meta(), ino, reader);
    return impl_->MakeFile(reply->attr(), flags, false, before, writer, std::move(hold));
  }
  // O_TRUNC: register first (a read-only O_TRUNC open under a temporary id),
  // so that the service refuses a file of a committed checkpoint (EROFS)
  // before any of its storage is trimmed, and so that a checkpoint commit
  // meanwhile sees the file busy. The reply's layout and size guide the
  // trim; then the service records the size.
  const uint64_t truncater = writer != 0 ? writer : NewWriterHandle();
  request.set_writer_handle(truncater);
  auto registered = impl_->meta().Open(request);
  if (!registered.ok()) return registered.status();
  absl::Status status = impl_->TruncateStorage(impl_->WithLocalSize(registered->attr()), 0);
  request.set_truncate(true);
  absl::StatusOr<meta::AttrReply> reply =
      status.ok() ? impl_->meta().Open(request) : absl::StatusOr<meta::AttrReply>(status);
  if (!reply.ok() || truncater != writer) {
    if (registered->attr().type() == meta::REGULAR) impl_->ReleaseWriter(ino, truncater);
  }
  if (!reply.ok()) return reply.status();
  return impl_->MakeFile(reply->attr(), flags, true, before, writer);
}

}  // namespace ckptfs::client
