// OpenFileState (client/open_file_state.h) over a file with two copies of
// every chunk, on the metadata service in-process and the in-memory chunk
// transport (client/testing/): a chunk write that fails on one copy
// only reaches the application — at the next write, read, flush (what
// close does) and fsync — and the size it would have made is never
// published, so the state the app sees after the error is the one it was
// told about (client/replica_io.h, "When copies differ").
#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/buffer_pool.h"
#include "client/client_services.h"
#include "client/io_executor.h"
#include "client/layout.h"
#include "client/open_file_registry.h"
#include "client/open_file_state.h"
#include "client/replica_io.h"
#include "client/testing/fake_chunk_transport.h"
#include "client/testing/in_process_meta.h"
#include "client/write_source.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs::client {
namespace {

constexpr uint32_t kChunk = 4096;

// The fake storage servers, with the writes to one server failing (EIO),
// as a full or failing disk answers.
class OneServerFailsWrites : public ChunkTransport {
 public:
  explicit OneServerFailsWrites(uint32_t failing) : failing_(failing) {}

  using ChunkTransport::WriteChunk;
  absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, uint32_t offset,
                          const void* data, size_t length, bool replace,
                          std::optional<uint32_t> crc32c) override {
    if (server_id == failing_) {
      return ErrnoStatus(EIO, absl::StrCat("storage server ", server_id, ": disk error"));
    }
    return servers.WriteChunk(server_id, ino, chunk_index, offset, data, length, replace, crc32c);
  }
  absl::StatusOr<size_t> ReadChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                   uint32_t offset, void* buf, size_t length) override {
    return servers.ReadChunk(server_id, ino, chunk_index, offset, buf, length);
  }
  absl::Status TrimChunks(uint32_t server_id, uint64_t ino, uint64_t trim_size,
                          uint32_t chunk_size) override {
    return servers.TrimChunks(server_id, ino, trim_size, chunk_size);
  }
  absl::Status SyncChunks(uint32_t server_id, uint64_t ino) override {
    return servers.SyncChunks(server_id, ino);
  }

  testing::FakeChunkTransport servers;

 private:
  const uint32_t failing_;
};

class ReplicatedFileTest : public ::testing::Test {
 protected:
  ReplicatedFileTest() : executor_(4), buffers_(1 << 20) {}

  // Creates `name` with two copies per chunk, and a transport whose writes
  // to the server of copy 2 of chunk 0 fail.
  void SetUpFile(const std::string& name) {
    testing::InProcessMetaService::Options options;
    options.storage_servers = 3;
    options.default_chunk_size = kChunk;
    options.default_replicas = 2;
    auto service = testing::InProcessMetaService::Start(options);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
    meta_ = service_->NewClient();
    meta::CreateRequest request;
    request.set_parent(kRootIno);
    request.set_name(name);
    request.set_mode(0644);
    absl::StatusOr<meta::CreateReply> created = meta_->Create(request);
    ASSERT_TRUE(created.ok()) << created.status();
    attr_ = created->attr();
    ASSERT_EQ(attr_.layout().replicas(), 2u);
    copies_ = ReplicaServers(attr_.layout(), 0);
    ASSERT_EQ(copies_.size(), 2u);
    transport_ = std::make_unique<OneServerFailsWrites>(copies_[1]);
    services_.meta = meta_.get();
    services_.transport = transport_.get();
    services_.failed_servers = &failed_;
    services_.executor = &executor_;
    services_.buffers = &buffers_;
    services_.registry = &registry_;
    state_ = std::make_shared<OpenFileState>(services_, attr_);
    state_->AddHandle();
  }

  void TearDown() override {
    if (state_ != nullptr) state_->ReleaseHandle();
  }

  absl::StatusOr<size_t> Write(uint64_t offset, const std::string& data) {
    MemorySource source(data.data());
    return state_->Write(offset, source, data.size(), /*append=*/false);
  }

  uint64_t ServiceSize() {
    meta::InodeRequest request;
    request.set_ino(attr_.ino());
    absl::StatusOr<meta::AttrReply> reply = meta_->GetAttr(request);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? reply->attr().size() : ~uint64_t{0};
  }

  // The failure names the failed server's copy: copy 2 of chunk 0, or,
  // when a later chunk's write failed first, copy 1 of chunk 1 (whose first
  // copy is on the next stripe server): which lands first is a race.
  static void ExpectTheCopyFailure(const absl::Status& status, uint32_t server) {
    EXPECT_FALSE(status.ok());
    EXPECT_EQ(ErrnoFromStatus(status), EIO) << status;
    EXPECT_NE(status.message().find(absl::StrCat(" of 2 (storage server ", server, ")")),
              std::string::npos)
        << status;
  }

  std::unique_ptr<testing::InProcessMetaService> service_;
  std::unique_ptr<MetaClient> meta_;
  IoExecutor executor_;
  BufferPool buffers_;
  OpenFileRegistry registry_;
  FailedServers failed_;
  ClientServices services_;
  meta::Attr attr_;
  std::vector<uint32_t> copies_;
  std::unique_ptr<OneServerFailsWrites> transport_;
  std::shared_ptr<OpenFileState> state_;
};

TEST_F(ReplicatedFileTest, AWriteFailedOnOneCopySurfacesAtFsync) {
  ASSERT_NO_FATAL_FAILURE(SetUpFile("synced"));
  const std::string data(1000, 'a');
  // Buffered: the chunk leaves at fsync.
  absl::StatusOr<size_t> wrote = Write(0, data);
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  ExpectTheCopyFailure(state_->Fsync(), copies_[1]);
  // The copy that could be written was; the other has nothing.
  EXPECT_EQ(transport_->servers.ChunkBytes(copies_[0], attr_.ino(), 0), data);
  EXPECT_EQ(transport_->servers.ChunkBytes(copies_[1], attr_.ino(), 0), std::nullopt);
  // Sticky: every later call says so, never the bytes of one copy.
  ExpectTheCopyFailure(Write(1000, "more").status(), copies_[1]);
  char buf[16];
  ExpectTheCopyFailure(state_->Read(0, buf, sizeof(buf), false).status(), copies_[1]);
  ExpectTheCopyFailure(state_->Fsync(), copies_[1]);
  // The size of the failed write was never published.
  EXPECT_EQ(ServiceSize(), 0u);
}

TEST_F(ReplicatedFileTest, AWriteFailedOnOneCopySurfacesAtClose) {
  ASSERT_NO_FATAL_FAILURE(SetUpFile("closed"));
  // Two whole chunks (each leaves when full) and a tail; chunk 0 fails.
  const std::string data(2 * kChunk + 10, 'b');
  absl::StatusOr<size_t> wrote = Write(0, data);
  if (wrote.ok()) {
    // What File::Close does for a handle that is not a checkpoint writer.
    ExpectTheCopyFailure(state_->Flush(), copies_[1]);
  } else {
    ExpectTheCopyFailure(wrote.status(), copies_[1]);  // already failed when it waited
    ExpectTheCopyFailure(state_->Flush(), copies_[1]);
  }
  EXPECT_EQ(ServiceSize(), 0u);
}

}  // namespace
}  // namespace ckptfs::client
