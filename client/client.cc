// See client.h. Construction and the namespace calls: each validates names
// before any RPC, forwards to the metadata service and reports the size of
// files open here including unflushed bytes. Files: client_files.cc; paths:
// client_paths.cc.
#include "client/client.h"

#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/blocking_chunk_transport.h"
#include "client/checkpoint_xattr_parsing.h"
#include "client/client_impl.h"
#include "client/grpc_meta_client.h"
#include "client/local_chunk_transport.h"
#include "client/uring_chunk_transport.h"
#include "common/credential.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/meta_channel.h"

namespace ckptfs::client {
namespace {

// The chunk transport ClientOptions ask for, with its server map loaded
// (an unreachable metadata service fails here, not at the first write).
absl::StatusOr<std::unique_ptr<ChunkTransport>> MakeNetworkTransport(
    const ClientOptions& options, MetaClient* meta, const std::string& credential) {
  if (options.data_transport == ClientOptions::DataTransport::kUring) {
    UringChunkTransport::Options uring;
    uring.connections_per_server = options.data_connections_per_server;
    uring.credential = credential;
    auto made = UringChunkTransport::Create(meta, options.data_timeout, uring);
    if (made.ok()) {
      if (absl::Status status = (*made)->RefreshServers(); !status.ok()) return status;
      return std::unique_ptr<ChunkTransport>(*std::move(made));
    }
    CKPTFS_LOG(kWarning) << "io_uring data transport unavailable (" << made.status().message()
                         << "); using blocking connections";
  }
  auto blocking = std::make_unique<BlockingChunkTransport>(meta, options.data_timeout, credential);
  if (absl::Status status = blocking->RefreshServers(); !status.ok()) return status;
  return std::unique_ptr<ChunkTransport>(std::move(blocking));
}

// The chunk transport ClientOptions ask for: the network one, read and
// written in place for storage servers on this host as local_reads and
// local_writes say.
absl::StatusOr<std::unique_ptr<ChunkTransport>> MakeChunkTransport(const ClientOptions& options,
                                                                   MetaClient* meta,
                                                                   const std::string& credential) {
  absl::StatusOr<std::unique_ptr<ChunkTransport>> network =
      MakeNetworkTransport(options, meta, credential);
  if (!network.ok() || (!options.local_reads && !options.local_writes)) return network;
  LocalChunkTransport::Use use;
  use.reads = options.local_reads;
  use.writes = options.local_writes;
  return std::unique_ptr<ChunkTransport>(
      std::make_unique<LocalChunkTransport>(*std::move(network), meta, absl::Seconds(10), use));
}

// The version a Client reports in its heartbeats.
constexpr char kClientVersion[] = "ckptfs 0.1";

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The mountpoint of a FUSE daemon, from its own command line
// (`--mountpoint=DIR` or `--mountpoint DIR`, as ckptfs-fuse takes it); ""
// for any other program.
std::string MountpointFromCmdline() {
  const std::vector<std::string> args =
      absl::StrSplit(ReadSmallFile("/proc/self/cmdline"), '\0', absl::SkipEmpty());
  for (size_t i = 0; i < args.size(); ++i) {
    if (absl::StartsWith(args[i], "--mountpoint=")) return args[i].substr(13);
    if (args[i] == "--mountpoint" && i + 1 < args.size()) return args[i + 1];
  }
  return "";
}

}  // namespace

meta::ClientInfo DescribeThisClient() {
  meta::ClientInfo self;
  self.set_client_id(absl::StrFormat("%016x", NewWriterHandle()));
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0) self.set_hostname(host);
  self.set_pid(static_cast<uint32_t>(::getpid()));
  std::string comm = ReadSmallFile("/proc/self/comm");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  self.set_program(comm);
  self.set_mountpoint(MountpointFromCmdline());
  self.set_version(kClientVersion);
  self.set_started_ms(absl::ToUnixMillis(absl::Now()));
  return self;
}

ClientImpl::~ClientImpl() {
  stop_heartbeat_.Notify();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void ClientImpl::StartHeartbeat(meta::ClientInfo self) {
  heartbeat_ = std::thread([this, self = std::move(self)] {
    meta::ClientHeartbeatRequest request;
    *request.mutable_client() = self;
    request.set_interval_ms(
        static_cast<uint32_t>(absl::ToInt64Milliseconds(kClientHeartbeatInterval)));
    bool warned = false;
    do {
      absl::StatusOr<meta::Empty> sent = meta_->ClientHeartbeat(request);
      // Said once at debug level: a service that does not know the RPC
      // (older build) or is restarting is not worth a log line each time.
      if (!sent.ok() && !warned) {
        CKPTFS_LOG(kDebug) << "client heartbeat failed (`ckptfs status` will not list this "
                              "client until one succeeds): "
                           << sent.status().message();
        warned = true;
      } else if (sent.ok()) {
        warned = false;
      }
    } while (!stop_heartbeat_.WaitForNotificationWithTimeout(kClientHeartbeatInterval));
  });
}

ClientImpl::ClientImpl(const ClientOptions& options, std::unique_ptr<MetaClient> meta,
                       std::unique_ptr<ChunkTransport> transport)
    : meta_(std::move(meta)),
      commits_(meta_.get()),
      transport_(std::move(transport)),
      buffers_(static_cast<size_t>(std::max<int64_t>(0, options.idle_buffer_bytes)),
               static_cast<size_t>(std::max<int64_t>(0, options.write_buffer_budget_bytes)),
               static_cast<size_t>(std::max<int64_t>(0, options.read_cache_budget_bytes))) {
  executor_ = std::make_unique<IoExecutor>(std::max(1, options.io_threads));
  transport_->TrackWrites(&unsynced_writes_);
  services_.meta = meta_.get();
  services_.transport = transport_.get();
  services_.unsynced_writes = &unsynced_writes_;
  services_.failed_servers = &failed_servers_;
  services_.executor = executor_.get();
  services_.buffers = &buffers_;
  services_.registry = &registry_;
  services_.options = options;
}

meta::Attr ClientImpl::WithLocalSize(meta::Attr attr) {
  if (attr.type() != meta::REGULAR) return attr;
  if (std::shared_ptr<OpenFileState> state = registry_.Find(attr.ino())) {
    if (std::optional<uint64_t> live = state->LiveSize()) {
      attr.set_size(std::max(attr.size(), *live));
    }
  }
  return attr;
}

Client::Client(std::unique_ptr<ClientImpl> impl) : impl_(std::move(impl)) {}

Client::~Client() = default;

std::string DefaultCredentialFile() {
  const char* file = std::getenv(kCredentialFileEnv);
  return file == nullptr ? std::string() : std::string(file);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  // A wrong address should fail a mount within seconds, while a service
  // that is still starting gets that long to answer.
  constexpr absl::Duration kConnectTimeout = absl::Seconds(10);
  auto unreachable = [&](const absl::Status& status) {
    return ErrnoStatusWithCode(status.code(), ErrnoFromStatus(status),
                               absl::StrCat("cannot reach the metadata service at ",
                                            options.meta_address, ": ", status.message(),
                                            " (is ckptfs-meta running there? `ckptfs status "
                                            "--meta ",
                                            options.meta_address, "` tells)"));
  };
  // A malformed address list fails here with what is wrong with it, not as
  // "unreachable" after gRPC tried to dial it as written.
  if (absl::StatusOr<std::string> target = MetaChannelTarget(options.meta_address); !target.ok()) {
    return ErrnoStatus(EINVAL, target.status().message());
  }
  absl::StatusOr<std::string> credential = LoadCredentialFlag(options.credential_file);
  if (!credential.ok()) return credential.status();
  // A refusal (EACCES: no or another credential) is not "unreachable": the
  // service's message says what to give.
  auto refused = [](const absl::Status& status) { return ErrnoFromStatus(status) == EACCES; };
  {
    GrpcMetaClient probe(options.meta_address, std::min(options.rpc_timeout, kConnectTimeout),
                         *credential);
    if (auto servers = probe.ListServers(meta::Empty()); !servers.ok()) {
      return refused(servers.status()) ? servers.status() : unreachable(servers.status());
    }
  }
  auto meta =
      std::make_unique<GrpcMetaClient>(options.meta_address, options.rpc_timeout, *credential);
  auto transport = MakeChunkTransport(options, meta.get(), *credential);
  if (!transport.ok()) {
    return refused(transport.status()) ? transport.status() : unreachable(transport.status());
  }
  std::unique_ptr<Client> client =
      CreateWithServices(options, std::move(meta), *std::move(transport));
  client->impl_->StartHeartbeat(DescribeThisClient());
  return client;
}

std::unique_ptr<Client> Client::CreateWithServices(const ClientOptions& options,
                                                   std::unique_ptr<MetaClient> meta,
                                                   std::unique_ptr<ChunkTransport> transport) {
  return std::unique_ptr<Client>(
      new Client(std::make_unique<ClientImpl>(options, std::move(meta), std::move(transport))));
}

absl::StatusOr<meta::Attr> Client::Lookup(uint64_t parent, absl::string_view name) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  meta::LookupRequest request;
  request.set_parent(parent);
  request.set_name(std::string(name));
  auto reply = impl_->meta().Lookup(request);
  if (!reply.ok()) return reply.status();
  return impl_->WithLocalSize(reply->attr());
}

absl::StatusOr<meta::Attr> Client::GetAttr(uint64_t ino) {
  meta::InodeRequest request;
  request.set_ino(ino);
  auto reply = impl_->meta().GetAttr(request);
  if (!reply.ok()) return reply.status();
  return impl_->WithLocalSize(reply->attr());
}

absl::StatusOr<meta::Attr> Client::SetAttr(const meta::SetAttrRequest& request) {
  if ((request.valid() & meta::SET_SIZE) == 0) {
    auto reply = impl_->meta().SetAttr(request);
    if (!reply.ok()) return reply.status();
    return impl_->WithLocalSize(reply->attr());
  }
  // A truncate registers a writer for its duration, as an O_TRUNC open
  // does: the service refuses a file of a committed checkpoint (EROFS)
  // before storage is trimmed, and a checkpoint commit meanwhile sees the
  // file busy.
  const uint64_t truncater = NewWriterHandle();
  meta::OpenRequest open;
  open.set_ino(request.ino());
  open.set_writer_handle(truncater);
  auto opened = impl_->meta().Open(open);
  if (!opened.ok()) return opened.status();
  const meta::Attr attr = impl_->WithLocalSize(opened->attr());
  // Storage first, so that a later extension reads zeros.
  absl::Status status = impl_->TruncateStorage(attr, request.size());
  absl::StatusOr<meta::AttrReply> reply =
      status.ok() ? impl_->meta().SetAttr(request) : absl::StatusOr<meta::AttrReply>(status);
  if (attr.type() == meta::REGULAR) impl_->ReleaseWriter(request.ino(), truncater);
  if (!reply.ok()) return reply.status();
  if (std::shared_ptr<OpenFileState> state = impl_->registry().Find(request.ino())) {
    state->SetSize(reply->attr().size());
  }
  return reply->attr();
}

absl::StatusOr<meta::Attr> Client::Mkdir(uint64_t parent, absl::string_view name, uint32_t mode,
                                         uint32_t uid, uint32_t gid) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  meta::MkdirRequest request;
  request.set_parent(parent);
  request.set_name(std::string(name));
  request.set_mode(mode);
  request.set_uid(uid);
  request.set_gid(gid);
  auto reply = impl_->meta().Mkdir(request);
  if (!reply.ok()) return reply.status();
  return reply->attr();
}

absl::StatusOr<meta::Attr> Client::Symlink(uint64_t parent, absl::string_view name,
                                           absl::string_view target, uint32_t uid, uint32_t gid) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  meta::SymlinkRequest request;
  request.set_parent(parent);
  request.set_name(std::string(name));
  request.set_target(std::string(target));
  request.set_uid(uid);
  request.set_gid(gid);
  auto reply = impl_->meta().Symlink(request);
  if (!reply.ok()) return reply.status();
  return reply->attr();
}

absl::StatusOr<meta::Attr> Client::Mknod(uint64_t parent, absl::string_view name, uint32_t mode,
                                         uint64_t rdev, uint32_t uid, uint32_t gid) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  meta::MknodRequest request;
  request.set_parent(parent);
  request.set_name(std::string(name));
  request.set_mode(mode);
  request.set_rdev(rdev);
  request.set_uid(uid);
  request.set_gid(gid);
  auto reply = impl_->meta().Mknod(request);
  if (!reply.ok()) return reply.status();
  return reply->attr();
}

absl::StatusOr<meta::Attr> Client::Link(uint64_t ino, uint64_t new_parent,
                                        absl::string_view new_name) {
  if (absl::Status status = ValidateName(new_name); !status.ok()) return status;
  meta::LinkRequest request;
  request.set_ino(ino);
  request.set_new_parent(new_parent);
  request.set_new_name(std::string(new_name));
  auto reply = impl_->meta().Link(request);
  if (!reply.ok()) return reply.status();
  return impl_->WithLocalSize(reply->attr());
}

absl::StatusOr<std::string> Client::ReadLink(uint64_t ino) {
  meta::InodeRequest request;
  request.set_ino(ino);
  auto reply = impl_->meta().ReadLink(request);
  if (!reply.ok()) return reply.status();
  return reply->target();
}

absl::Status Client::Unlink(uint64_t parent, absl::string_view name) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  meta::LookupRequest request;
  request.set_parent(parent);
  request.set_name(std::string(name));
  return impl_->meta().Unlink(request).status();
}

absl::Status Client::Rmdir(uint64_t parent, absl::string_view name) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  meta::LookupRequest request;
  request.set_parent(parent);
  request.set_name(std::string(name));
  return impl_->meta().Rmdir(request).status();
}

absl::Status Client::Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                            absl::string_view new_name, bool no_replace) {
  if (absl::Status status = ValidateName(name); !status.ok()) return status;
  if (absl::Status status = ValidateName(new_name); !status.ok()) return status;
  meta::RenameRequest request;
  request.set_parent(parent);
  request.set_name(std::string(name));
  request.set_new_parent(new_parent);
  request.set_new_name(std::string(new_name));
  request.set_no_replace(no_replace);
  return impl_->meta().Rename(request).status();
}

absl::StatusOr<meta::ReadDirReply> Client::ReadDir(uint64_t ino, absl::string_view start_after,
                                                   uint32_t limit) {
  meta::ReadDirRequest request;
  request.set_ino(ino);
  request.set_start_after(std::string(start_after));
  request.set_limit(limit);
  return impl_->meta().ReadDir(request);
}

absl::Status Client::SetXattr(uint64_t ino, absl::string_view name, absl::string_view value,
                              int flags, Cancellation* cancel) {
  if ((flags & ~(XATTR_CREATE | XATTR_REPLACE)) != 0 || flags == (XATTR_CREATE | XATTR_REPLACE)) {
    return ErrnoStatus(EINVAL, absl::StrCat("setxattr flags ", flags));
  }
  if (ClassifyCheckpointXattr(name) != CheckpointXattr::kNone) {
    return SetCheckpointXattr(ino, name, value, cancel);
  }
  meta::SetXattrRequest request;
  request.set_ino(ino);
  request.set_name(std::string(name));
  request.set_value(std::string(value));
  request.set_create_only((flags & XATTR_CREATE) != 0);
  request.set_replace_only((flags & XATTR_REPLACE) != 0);
  return impl_->meta().SetXattr(request).status();
}

absl::StatusOr<std::string> Client::GetXattr(uint64_t ino, absl::string_view name,
                                             Cancellation* cancel) {
  if (ClassifyCheckpointXattr(name) != CheckpointXattr::kNone) {
    return GetCheckpointXattr(ino, name, cancel);
  }
  meta::XattrRequest request;
  request.set_ino(ino);
  request.set_name(std::string(name));
  auto reply = impl_->meta().GetXattr(request);
  if (!reply.ok()) return reply.status();
  return reply->value();
}

absl::StatusOr<std::vector<std::string>> Client::ListXattr(uint64_t ino) {
  meta::InodeRequest request;
  request.set_ino(ino);
  auto reply = impl_->meta().ListXattr(request);
  if (!reply.ok()) return reply.status();
  return std::vector<std::string>(reply->names().begin(), reply->names().end());
}

absl::Status Client::RemoveXattr(uint64_t ino, absl::string_view name) {
  meta::XattrRequest request;
  request.set_ino(ino);
  request.set_name(std::string(name));
  return impl_->meta().RemoveXattr(request).status();
}

absl::StatusOr<meta::StatFsReply> Client::StatFs() { return impl_->meta().StatFs(meta::Empty()); }

absl::StatusOr<meta::ListServersReply> Client::ListServers() {
  return impl_->meta().ListServers(meta::Empty());
}

}  // namespace ckptfs::client
