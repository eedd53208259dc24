// FakeMetaClient: the metadata service in memory, for unit tests of the
// client and of anything built on it (fuse/ may use it too).
//
// It keeps inodes, directory entries, symlink targets, xattrs and layouts
// like the real service: inode numbers from a counter (root = 1), chunk size
// from the parent directory's "user.ckptfs.chunk_size" xattr (inherited by
// new subdirectories) or the default, stripe = all servers rotated by a
// counter. Unlinked files stay reachable by inode (as orphans do). Tests can
// count calls per RPC and make the next call of an RPC fail.
//
// Thread-safety: thread-safe (one mutex).
#ifndef CKPTFS_CLIENT_TESTING_FAKE_META_CLIENT_H_
#define CKPTFS_CLIENT_TESTING_FAKE_META_CLIENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/meta_client.h"

namespace ckptfs::client::testing {

class FakeMetaClient : public MetaClient {
 public:
  inline static constexpr char kChunkSizeXattr[] = "user.ckptfs.chunk_size";

  // Storage servers `server_ids` (addresses "127.0.0.1:<7000 + id>");
  // files get `default_chunk_size` unless their directory says otherwise.
  explicit FakeMetaClient(std::vector<uint32_t> server_ids = {1, 2, 3, 4},
                          uint32_t default_chunk_size = 4u << 20);

  absl::StatusOr<meta::AttrReply> Lookup(const meta::LookupRequest& request) override;
  absl::StatusOr<meta::AttrReply> GetAttr(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::AttrReply> SetAttr(const meta::SetAttrRequest& request) override;
  absl::StatusOr<meta::CreateReply> Create(const meta::CreateRequest& request) override;
  absl::StatusOr<meta::AttrReply> Mkdir(const meta::MkdirRequest& request) override;
  absl::StatusOr<meta::AttrReply> Symlink(const meta::SymlinkRequest& request) override;
  absl::StatusOr<meta::ReadLinkReply> ReadLink(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::Empty> Unlink(const meta::LookupRequest& request) override;
  absl::StatusOr<meta::Empty> Rmdir(const meta::LookupRequest& request) override;
  absl::StatusOr<meta::Empty> Rename(const meta::RenameRequest& request) override;
  absl::StatusOr<meta::ReadDirReply> ReadDir(const meta::ReadDirRequest& request) override;
  absl::StatusOr<meta::AttrReply> Open(const meta::OpenRequest& request) override;
  absl::StatusOr<meta::AttrReply> CommitWrite(const meta::CommitWriteRequest& request) override;
  absl::StatusOr<meta::Empty> SetXattr(const meta::SetXattrRequest& request) override;
  absl::StatusOr<meta::XattrValue> GetXattr(const meta::XattrRequest& request) override;
  absl::StatusOr<meta::XattrNames> ListXattr(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::Empty> RemoveXattr(const meta::XattrRequest& request) override;
  absl::StatusOr<meta::StatFsReply> StatFs(const meta::Empty& request) override;
  absl::StatusOr<meta::RegisterServerReply> RegisterServer(
      const meta::RegisterServerRequest& request) override;
  absl::StatusOr<meta::Empty> Heartbeat(const meta::HeartbeatRequest& request) override;
  absl::StatusOr<meta::ListServersReply> ListServers(const meta::Empty& request) override;

  // Calls of `rpc` (e.g. "CommitWrite") so far, failed ones included.
  int Calls(absl::string_view rpc) const;
  // The next call of `rpc` fails with `status` (once).
  void FailNext(absl::string_view rpc, absl::Status status);
  // The size the service has recorded for `ino` (0 if unknown).
  uint64_t RecordedSize(uint64_t ino) const;
  // CommitWrite calls that asked for a durable commit (fsync), and the size
  // the last one recorded.
  int DurableCommits() const;
  uint64_t DurableSize(uint64_t ino) const;

 private:
  struct Inode {
    meta::Attr attr;
    std::map<std::string, uint64_t> entries;  // directories
    std::string target;                       // symlinks
    std::map<std::string, std::string> xattrs;
    uint64_t durable_size = 0;
  };

  // Counts the call and returns the injected failure, if any.
  absl::Status Enter(absl::string_view rpc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Inode*> Find(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Inode*> FindDir(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Inode& NewInode(meta::FileType type, uint32_t mode, uint32_t uid, uint32_t gid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops one link of `ino` (an entry removed or replaced).
  void DropLink(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<uint32_t> server_ids_;
  const uint32_t default_chunk_size_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Inode> inodes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ino_ ABSL_GUARDED_BY(mu_) = 2;
  uint64_t stripe_rotation_ ABSL_GUARDED_BY(mu_) = 0;
  int durable_commits_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int, std::less<>> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Status, std::less<>> fail_next_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::client::testing

#endif  // CKPTFS_CLIENT_TESTING_FAKE_META_CLIENT_H_
