// client/replica_io.h over the in-memory storage servers of
// client/testing/: a chunk write reaches every copy and fails if any copy
// fails; a read falls over to the next copy on a failed server or a
// missing chunk, and only calls a chunk a hole when every copy lacks it; a
// short copy never hides the bytes a longer one holds; a partial write to
// a copy that lost its chunk rebuilds it from another copy; the servers
// that failed reads are remembered per FailedServers (per Client).
#include "client/replica_io.h"

#include <cerrno>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/layout.h"
#include "client/stripe_ops.h"
#include "client/testing/fake_chunk_transport.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs::client {
namespace {

// The fake, with servers that can be "down": every request to one fails as
// a refused connection does.
class DownableTransport : public ChunkTransport {
 public:
  explicit DownableTransport(testing::FakeChunkTransport* servers) : servers_(servers) {}

  void SetDown(uint32_t server_id, bool down) {
    absl::MutexLock lock(&mu_);
    if (down) {
      down_.insert(server_id);
    } else {
      down_.erase(server_id);
    }
  }
  int ReadsFrom(uint32_t server_id) {
    absl::MutexLock lock(&mu_);
    return reads_from_[server_id];
  }

  using ChunkTransport::WriteChunk;
  absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, uint32_t offset,
                          const void* data, size_t length, bool replace,
                          std::optional<uint32_t> crc32c) override {
    if (IsDown(server_id)) return Refused(server_id);
    {
      absl::MutexLock lock(&mu_);
      ++writes_to_[server_id];
    }
    // As a storage server does (server/storage/chunk_store.h): no merge
    // past the end of the chunk stored.
    if (!replace && offset > 0 && length > 0) {
      std::optional<std::string> stored = servers_->ChunkBytes(server_id, ino, chunk_index);
      const size_t have = stored.has_value() ? stored->size() : 0;
      if (have < offset) {
        return ErrnoStatus(ENODATA, absl::StrCat("chunk ", chunk_index, " holds ", have,
                                                 " bytes on storage server ", server_id));
      }
    }
    return servers_->WriteChunk(server_id, ino, chunk_index, offset, data, length, replace, crc32c);
  }
  absl::StatusOr<size_t> ReadChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                   uint32_t offset, void* buf, size_t length) override {
    {
      absl::MutexLock lock(&mu_);
      ++reads_from_[server_id];
    }
    if (IsDown(server_id)) return Refused(server_id);
    return servers_->ReadChunk(server_id, ino, chunk_index, offset, buf, length);
  }
  int WritesTo(uint32_t server_id) {
    absl::MutexLock lock(&mu_);
    return writes_to_[server_id];
  }
  absl::Status TrimChunks(uint32_t server_id, uint64_t ino, uint64_t trim_size,
                          uint32_t chunk_size) override {
    if (IsDown(server_id)) return Refused(server_id);
    return servers_->TrimChunks(server_id, ino, trim_size, chunk_size);
  }
  absl::Status SyncChunks(uint32_t server_id, uint64_t ino) override {
    return servers_->SyncChunks(server_id, ino);
  }

 private:
  bool IsDown(uint32_t server_id) {
    absl::MutexLock lock(&mu_);
    return down_.count(server_id) > 0;
  }
  static absl::Status Refused(uint32_t server_id) {
    return ErrnoStatusWithCode(
        absl::StatusCode::kUnavailable, ECONNREFUSED,
        absl::StrCat("storage server ", server_id, " unreachable: connect: Connection refused"));
  }

  testing::FakeChunkTransport* const servers_;
  absl::Mutex mu_;
  std::set<uint32_t> down_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, int> reads_from_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, int> writes_to_ ABSL_GUARDED_BY(mu_);
};

class ReplicaIoTest : public ::testing::Test {
 protected:
  ReplicaIoTest() : transport_(&servers_), executor_(4) {
    layout_.set_chunk_size(1024);
    for (uint32_t id : {1u, 2u, 3u, 4u}) layout_.add_stripe(id);
    layout_.set_replicas(2);
  }

  // Writes `bytes` as chunk `index` (whole) and waits for the answer.
  absl::Status Write(uint64_t index, const std::string& bytes) {
    return WriteAt(index, 0, bytes, /*replace=*/true);
  }
  // Writes `bytes` at `offset` of chunk `index` and waits for the answer.
  absl::Status WriteAt(uint64_t index, uint32_t offset, const std::string& bytes,
                       bool replace = false) {
    ChunkWrite write;
    write.ino = kIno;
    write.chunk_index = index;
    write.offset = offset;
    write.data = bytes.data();
    write.length = bytes.size();
    write.replace = replace;
    absl::Notification done;
    absl::Status result;
    int calls = 0;
    WriteChunkCopies(transport_, executor_, layout_, write, [&](absl::Status status) {
      result = std::move(status);
      ++calls;
      done.Notify();
    });
    done.WaitForNotification();
    EXPECT_EQ(calls, 1);
    return result;
  }

  absl::StatusOr<std::string> Read(uint64_t index, size_t length) {
    return ReadWith(failed_, index, length);
  }
  absl::StatusOr<std::string> ReadWith(FailedServers& failed, uint64_t index, size_t length) {
    std::string out(length, '\0');
    absl::StatusOr<size_t> got =
        ReadChunkCopy(transport_, &failed, layout_, kIno, index, 0, out.data(), out.size());
    if (!got.ok()) return got.status();
    out.resize(*got);
    return out;
  }

  static constexpr uint64_t kIno = 77;
  testing::FakeChunkTransport servers_;
  DownableTransport transport_;
  IoExecutor executor_;
  FailedServers failed_;
  meta::Layout layout_;
};

TEST_F(ReplicaIoTest, AWriteStoresEveryCopyOnItsServer) {
  ASSERT_TRUE(Write(0, "chunk zero").ok());
  ASSERT_TRUE(Write(3, "chunk three").ok());
  EXPECT_EQ(servers_.ChunkBytes(1, kIno, 0), "chunk zero");
  EXPECT_EQ(servers_.ChunkBytes(2, kIno, 0), "chunk zero");
  EXPECT_EQ(servers_.ChunkBytes(3, kIno, 0), std::nullopt);
  EXPECT_EQ(servers_.ChunkBytes(4, kIno, 3), "chunk three");
  EXPECT_EQ(servers_.ChunkBytes(1, kIno, 3), "chunk three");  // wraps round the stripe
  EXPECT_EQ(servers_.ChunkCount(kIno), 4);
}

TEST_F(ReplicaIoTest, AWriteFailsWhenOneCopyFails) {
  transport_.SetDown(2, true);
  absl::Status status = Write(0, "lost");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(ErrnoFromStatus(status), ECONNREFUSED) << status;
  EXPECT_NE(status.message().find("copy 2 of 2 (storage server 2)"), std::string::npos) << status;
  // The copy that could be written was: the failure is the file's to report.
  EXPECT_EQ(servers_.ChunkBytes(1, kIno, 0), "lost");
  // A chunk whose copies avoid the down server is written.
  EXPECT_TRUE(Write(2, "fine").ok());
}

TEST_F(ReplicaIoTest, OneCopyLayoutsWriteOnce) {
  layout_.clear_replicas();
  ASSERT_TRUE(Write(1, "single").ok());
  EXPECT_EQ(servers_.ChunkCount(kIno), 1);
  EXPECT_EQ(servers_.ChunkBytes(2, kIno, 1), "single");
  transport_.SetDown(2, true);
  EXPECT_FALSE(Read(1, 6).ok());  // nowhere else to read it
}

TEST_F(ReplicaIoTest, ReadsFallOverToTheOtherCopy) {
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(Write(i, "data of " + std::to_string(i)).ok());
  for (uint32_t down = 1; down <= 4; ++down) {
    transport_.SetDown(down, true);
    for (uint64_t i = 0; i < 8; ++i) {
      // The bytes the file holds (a read past them with a copy down is an
      // error: AShortCopyWithTheOtherDownIsAnErrorNotZeros).
      const std::string expected = "data of " + std::to_string(i);
      absl::StatusOr<std::string> got = Read(i, expected.size());
      ASSERT_TRUE(got.ok()) << "server " << down << " down, chunk " << i << ": " << got.status();
      EXPECT_EQ(*got, expected);
    }
    transport_.SetDown(down, false);
  }
  // Two servers down that hold both copies of chunk 0 (servers 1 and 2).
  transport_.SetDown(1, true);
  transport_.SetDown(2, true);
  absl::StatusOr<std::string> lost = Read(0, 64);
  ASSERT_FALSE(lost.ok());
  EXPECT_NE(ErrnoFromStatus(lost.status()), ENOENT) << lost.status();  // never a hole
}

TEST_F(ReplicaIoTest, SequentialReadsSpreadOverEveryCopy) {
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(Write(i, "x").ok());
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(Read(i, 1).ok());
  // Eight chunks over four servers with two copies: two reads each, and
  // both copies of some chunk were read.
  for (uint32_t id = 1; id <= 4; ++id) EXPECT_EQ(transport_.ReadsFrom(id), 2) << "server " << id;
}

TEST_F(ReplicaIoTest, AServerThatFailedIsAskedLastForAWhile) {
  ASSERT_TRUE(Write(0, "zero").ok());  // copies on servers 1 (read first) and 2
  transport_.SetDown(1, true);
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<std::string> got = Read(0, 4);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, "zero");
  }
  // Only the first read waited for server 1; the others went to server 2.
  EXPECT_EQ(transport_.ReadsFrom(1), 1);
  EXPECT_EQ(transport_.ReadsFrom(2), 5);
  // Still asked when it is the only copy left to try.
  transport_.SetDown(2, true);
  EXPECT_FALSE(Read(0, 4).ok());
  EXPECT_EQ(transport_.ReadsFrom(1), 2);
  EXPECT_EQ(transport_.ReadsFrom(2), 6);
  // Both back: with both suspect the usual order holds, and a server's
  // answer clears it.
  transport_.SetDown(1, false);
  transport_.SetDown(2, false);
  ASSERT_TRUE(Read(0, 4).ok());
  EXPECT_EQ(transport_.ReadsFrom(1), 3);
  ASSERT_TRUE(Read(0, 4).ok());  // server 2 is suspect still, server 1 no more
  EXPECT_EQ(transport_.ReadsFrom(1), 4);
  EXPECT_EQ(transport_.ReadsFrom(2), 6);
}

TEST_F(ReplicaIoTest, AMissingCopyIsNotAHoleWhileAnotherHasTheChunk) {
  ASSERT_TRUE(Write(0, "kept on one copy").ok());
  // Copy 1 (server 1) loses its chunk file.
  ASSERT_TRUE(servers_.TrimChunks(1, kIno, 0, 1024).ok());
  absl::StatusOr<std::string> got = Read(0, 64);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "kept on one copy");
  // Chunk 4 (copies on servers 1 and 2) is read from copy 1 first: that
  // one lost, copy 0 answers.
  ASSERT_TRUE(Write(4, "second").ok());
  ASSERT_TRUE(servers_.TrimChunks(2, kIno, 0, 1024).ok());
  got = Read(4, 64);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "second");
}

TEST_F(ReplicaIoTest, AHoleIsWhereEveryCopyLacksTheChunk) {
  absl::StatusOr<std::string> got = Read(5, 64);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(ErrnoFromStatus(got.status()), ENOENT) << got.status();
  // One copy missing, the other's server down: not a hole, a failure.
  ASSERT_TRUE(Write(5, "five").ok());
  ASSERT_TRUE(servers_.TrimChunks(2, kIno, 0, 1024).ok());  // copy 0 of chunk 5
  transport_.SetDown(3, true);                              // copy 1 of chunk 5
  got = Read(5, 64);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(ErrnoFromStatus(got.status()), ENOENT) << got.status();
  EXPECT_NE(got.status().message().find("storage server 3"), std::string::npos) << got.status();
}

// The servers that failed reads are kept per Client: one Client's down
// server never reorders another's reads.
TEST_F(ReplicaIoTest, EachFailedServersListIsItsOwn) {
  ASSERT_TRUE(Write(0, "zero").ok());  // copies on servers 1 (read first) and 2
  FailedServers other;
  transport_.SetDown(1, true);
  ASSERT_TRUE(Read(0, 4).ok());  // failed_ now suspects server 1
  transport_.SetDown(1, false);
  ASSERT_EQ(transport_.ReadsFrom(1), 1);
  // `other` never saw server 1 fail: it asks server 1 first.
  absl::StatusOr<std::string> got = ReadWith(other, 0, 4);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(transport_.ReadsFrom(1), 2);
  EXPECT_EQ(transport_.ReadsFrom(2), 1);
  // failed_ still asks server 2 first.
  ASSERT_TRUE(Read(0, 4).ok());
  EXPECT_EQ(transport_.ReadsFrom(1), 2);
  EXPECT_EQ(transport_.ReadsFrom(2), 2);
}

// A copy cut short (a truncate that failed on the other copy, a lost tail)
// that answers first is not taken as the chunk: the bytes the other copy
// holds are read, not zeros.
TEST_F(ReplicaIoTest, AShortCopyDoesNotHideTheBytesOfALongerOne) {
  for (uint32_t cut : {1u, 2u}) {  // the copy read first, then the other
    SCOPED_TRACE(absl::StrCat("copy on server ", cut, " cut"));
    ASSERT_TRUE(Write(0, "0123456789").ok());  // servers 1 and 2
    ASSERT_TRUE(servers_.TrimChunks(cut, kIno, 4, 1024).ok());
    ASSERT_EQ(servers_.ChunkBytes(cut, kIno, 0), "0123");
    absl::StatusOr<std::string> got = Read(0, 64);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, "0123456789");
  }
  // Copies that agree and are short (the chunk's end) are asked once each.
  ASSERT_TRUE(Write(0, "0123456789").ok());
  const int before = transport_.ReadsFrom(1) + transport_.ReadsFrom(2);
  absl::StatusOr<std::string> got = Read(0, 64);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "0123456789");
  EXPECT_EQ(transport_.ReadsFrom(1) + transport_.ReadsFrom(2), before + 2);
  // A whole answer needs no other copy.
  got = Read(0, 10);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(transport_.ReadsFrom(1) + transport_.ReadsFrom(2), before + 3);
}

// Review of the fix above: a copy that lost its tail while the other copy
// is down must not make the tail read as zeros: an error instead.
TEST_F(ReplicaIoTest, AShortCopyWithTheOtherDownIsAnErrorNotZeros) {
  ASSERT_TRUE(Write(0, "0123456789").ok());  // servers 1 and 2
  ASSERT_TRUE(servers_.TrimChunks(1, kIno, 4, 1024).ok());
  transport_.SetDown(2, true);
  absl::StatusOr<std::string> got = Read(0, 10);
  EXPECT_FALSE(got.ok()) << *got;
  // What the short copy holds alone is still served.
  got = Read(0, 4);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "0123");
  transport_.SetDown(2, false);
  got = Read(0, 10);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "0123456789");
}

TEST_F(ReplicaIoTest, ATruncateThatFailsOnOneCopyFailsTheCall) {
  ASSERT_TRUE(Write(0, "0123456789").ok());
  transport_.SetDown(2, true);
  absl::Status status = TrimStripe(transport_, executor_, kIno, layout_, 4);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("storage server 2"), std::string::npos) << status;
  transport_.SetDown(2, false);
  // What the caller was told: failed, so the size stays; the bytes the
  // longer copy still holds read back, whichever copy is asked first.
  absl::StatusOr<std::string> got = Read(0, 10);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "0123456789");
}

// A partial write (offset > 0) to a copy whose chunk was lost rebuilds
// that copy from the other one, never zeros where the other copy has data.
TEST_F(ReplicaIoTest, APartialWriteRebuildsACopyThatLostItsChunk) {
  ASSERT_TRUE(Write(0, "0123456789").ok());                 // servers 1 and 2
  ASSERT_TRUE(servers_.TrimChunks(1, kIno, 0, 1024).ok());  // server 1 lost it
  absl::Status status = WriteAt(0, 4, "AB");
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(servers_.ChunkBytes(1, kIno, 0), "0123AB6789");
  EXPECT_EQ(servers_.ChunkBytes(2, kIno, 0), "0123AB6789");
  // A copy cut short is rebuilt too.
  ASSERT_TRUE(servers_.TrimChunks(2, kIno, 2, 1024).ok());
  ASSERT_TRUE(WriteAt(0, 8, "xy").ok());
  EXPECT_EQ(servers_.ChunkBytes(1, kIno, 0), "0123AB67xy");
  EXPECT_EQ(servers_.ChunkBytes(2, kIno, 0), "0123AB67xy");
}

// A sparse write: every copy lacks the bytes before it, a hole.
TEST_F(ReplicaIoTest, APartialWriteIntoAHoleMakesTheSameZerosOnEveryCopy) {
  absl::Status status = WriteAt(5, 10, "q");
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(servers_.ChunkBytes(2, kIno, 5), std::string(10, '\0') + "q");
  EXPECT_EQ(servers_.ChunkBytes(3, kIno, 5), std::string(10, '\0') + "q");
  // Past the end of chunks that agree.
  ASSERT_TRUE(WriteAt(5, 20, "r").ok());
  const std::string want = std::string(10, '\0') + "q" + std::string(9, '\0') + "r";
  EXPECT_EQ(servers_.ChunkBytes(2, kIno, 5), want);
  EXPECT_EQ(servers_.ChunkBytes(3, kIno, 5), want);
  // Copies of different lengths, both short of the write: the longer wins.
  ASSERT_TRUE(Write(6, "abcdef").ok());  // servers 3 and 4
  ASSERT_TRUE(servers_.TrimChunks(4, kIno, 6 * 1024 + 3, 1024).ok());
  ASSERT_EQ(servers_.ChunkBytes(4, kIno, 6), "abc");
  ASSERT_TRUE(WriteAt(6, 8, "z").ok());
  EXPECT_EQ(servers_.ChunkBytes(3, kIno, 6), std::string("abcdef\0\0z", 9));
  EXPECT_EQ(servers_.ChunkBytes(4, kIno, 6), std::string("abcdef\0\0z", 9));
  // One copy: the same.
  layout_.clear_replicas();
  ASSERT_TRUE(WriteAt(9, 3, "s").ok());
  EXPECT_EQ(servers_.ChunkBytes(ServerForChunk(layout_, 9), kIno, 9), std::string("\0\0\0s", 4));
}

TEST_F(ReplicaIoTest, AFailedCopyStillFailsAPartialWrite) {
  ASSERT_TRUE(Write(0, "0123456789").ok());
  ASSERT_TRUE(servers_.TrimChunks(1, kIno, 0, 1024).ok());
  transport_.SetDown(2, true);
  absl::Status status = WriteAt(0, 4, "AB");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(ErrnoFromStatus(status), ECONNREFUSED) << status;
  // Never zeros made up on the copy that lost the chunk.
  EXPECT_EQ(servers_.ChunkBytes(1, kIno, 0), std::nullopt);
}

}  // namespace
}  // namespace ckptfs::client
