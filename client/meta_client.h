// MetaClient: the client's view of the metadata service, one method per RPC
// of proto/meta.proto (service MetaService).
//
// The real implementation (grpc_meta_client.h) puts a deadline on every call
// and turns gRPC statuses into absl::Status carrying the service's errno
// (common/grpc_status.h); the fake (client/testing/fake_meta_client.h) keeps
// a namespace in memory for unit tests. Code above this interface never sees
// gRPC.
//
// Thread-safety: implementations must allow concurrent calls from any thread.
#ifndef CKPTFS_CLIENT_META_CLIENT_H_
#define CKPTFS_CLIENT_META_CLIENT_H_

#include "absl/status/statusor.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

class MetaClient {
 public:
  virtual ~MetaClient() = default;

  // Namespace. Each returns the reply of the RPC of the same name, or the
  // service's error (with its errno attached), or a transport error
  // (ETIMEDOUT after the deadline, EIO otherwise).
  virtual absl::StatusOr<meta::AttrReply> Lookup(const meta::LookupRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> GetAttr(const meta::InodeRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> SetAttr(const meta::SetAttrRequest& request) = 0;
  virtual absl::StatusOr<meta::CreateReply> Create(const meta::CreateRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> Mkdir(const meta::MkdirRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> Symlink(const meta::SymlinkRequest& request) = 0;
  virtual absl::StatusOr<meta::ReadLinkReply> ReadLink(const meta::InodeRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> Unlink(const meta::LookupRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> Rmdir(const meta::LookupRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> Rename(const meta::RenameRequest& request) = 0;
  virtual absl::StatusOr<meta::ReadDirReply> ReadDir(const meta::ReadDirRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> Open(const meta::OpenRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> CommitWrite(
      const meta::CommitWriteRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> SetXattr(const meta::SetXattrRequest& request) = 0;
  virtual absl::StatusOr<meta::XattrValue> GetXattr(const meta::XattrRequest& request) = 0;
  virtual absl::StatusOr<meta::XattrNames> ListXattr(const meta::InodeRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> RemoveXattr(const meta::XattrRequest& request) = 0;
  virtual absl::StatusOr<meta::StatFsReply> StatFs(const meta::Empty& request) = 0;

  // Storage-server membership.
  virtual absl::StatusOr<meta::RegisterServerReply> RegisterServer(
      const meta::RegisterServerRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> Heartbeat(const meta::HeartbeatRequest& request) = 0;
  virtual absl::StatusOr<meta::ListServersReply> ListServers(const meta::Empty& request) = 0;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_META_CLIENT_H_
