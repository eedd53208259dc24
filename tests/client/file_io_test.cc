// File data path over the fakes: byte-exact write/read of files at chunk
// edges, random overwrites past the end against an in-memory model, holes,
// truncate, O_TRUNC, O_APPEND, and two handles of one inode.
#include <fcntl.h>

#include <algorithm>
#include <random>
#include <string>

#include "client/file.h"
#include "client/layout.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

class FileIoTest : public ClientFixture {};

void WriteInOddPieces(File& file, const std::string& data) {
  static constexpr size_t kPieces[] = {1, 4097, 12345, 65535, 100003, 7};
  size_t done = 0;
  for (int i = 0; done < data.size(); ++i) {
    const size_t n = std::min(kPieces[i % 6], data.size() - done);
    auto written = file.Write(done, data.data() + done, n);
    ASSERT_TRUE(written.ok()) << written.status();
    ASSERT_EQ(*written, n);
    done += n;
  }
}

TEST_F(FileIoTest, SizesAtChunkEdgesReadBackExactly) {
  const uint64_t sizes[] = {0, 1, kTestChunk - 1, kTestChunk, kTestChunk + 1,
                            3ull * kTestChunk + 17, 10ull * kTestChunk + 5};
  int i = 0;
  for (uint64_t size : sizes) {
    SCOPED_TRACE(size);
    const std::string data = RandomBytes(size, 100 + i);
    auto file = CreateFile("f" + std::to_string(i++));
    ASSERT_NE(file, nullptr);
    WriteInOddPieces(*file, data);
    EXPECT_EQ(file->size(), size);
    const uint64_t ino = file->ino();
    ASSERT_TRUE(file->Close().ok());
    EXPECT_EQ(meta_->RecordedSize(ino), size);  // close committed the size
    EXPECT_TRUE(SameBytes(ReadAll(ino), data));
    auto attr = client_->GetAttr(ino);
    ASSERT_TRUE(attr.ok());
    EXPECT_EQ(attr->size(), size);
  }
}

TEST_F(FileIoTest, SequentialWriteReplacesWholeChunksAndSpreadsThem) {
  const std::string data = RandomBytes(6ull * kTestChunk, 7);
  auto file = CreateFile("seq");
  WriteInOddPieces(*file, data);
  const uint64_t ino = file->ino();
  ASSERT_TRUE(file->Close().ok());
  // One WRITE per chunk, each a whole replace: no read-modify-write.
  EXPECT_EQ(transport_->counts().writes, 6);
  EXPECT_EQ(transport_->counts().replace_writes, 6);
  // Consecutive chunks on different servers of the stripe (3 servers).
  auto attr = client_->GetAttr(ino);
  ASSERT_TRUE(attr.ok());
  for (uint64_t c = 0; c < 6; ++c) {
    const uint32_t server = attr->layout().stripe(static_cast<int>(c % 3));
    auto bytes = transport_->ChunkBytes(server, ino, c);
    ASSERT_TRUE(bytes.has_value()) << "chunk " << c << " not on server " << server;
    EXPECT_EQ(*bytes, data.substr(c * kTestChunk, kTestChunk));
  }
  EXPECT_NE(attr->layout().stripe(0), attr->layout().stripe(1));
}

TEST_F(FileIoTest, AppendedChunksCarryTheirCrcAndOverwrittenOnesDoNot) {
  // Sequential writes: every chunk's CRC32C is computed as it is filled and
  // handed to the transport (the fake checks it against the bytes).
  const std::string data = RandomBytes(3ull * kTestChunk, 8);
  auto file = CreateFile("crc");
  WriteInOddPieces(*file, data);
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(transport_->counts().writes, 3);
  EXPECT_EQ(transport_->counts().writes_with_crc, 3);

  // A chunk rewritten in its middle before it is sent has no running CRC:
  // the transport computes it (a wrong one would fail the write).
  auto again = CreateFile("crc2");
  std::string model = RandomBytes(kTestChunk / 2, 9);
  ASSERT_TRUE(again->Write(0, model.data(), model.size()).ok());
  const std::string patch = RandomBytes(100, 10);
  ASSERT_TRUE(again->Write(10, patch.data(), patch.size()).ok());
  model.replace(10, patch.size(), patch);
  const uint64_t ino = again->ino();
  ASSERT_TRUE(again->Close().ok());
  EXPECT_EQ(transport_->counts().writes, 4);
  EXPECT_EQ(transport_->counts().writes_with_crc, 3);
  EXPECT_TRUE(SameBytes(ReadAll(ino), model));
}

TEST_F(FileIoTest, RandomOverwritesPastEndMatchModel) {
  std::mt19937 rng(42);
  std::string model;
  auto file = CreateFile("random");
  const uint64_t ino = file->ino();
  for (int op = 0; op < 300; ++op) {
    const uint64_t offset = rng() % (5 * kTestChunk);
    const size_t len = 1 + rng() % (kTestChunk + kTestChunk / 2);
    const std::string data = RandomBytes(len, op);
    auto written = file->Write(offset, data.data(), len);
    ASSERT_TRUE(written.ok()) << written.status();
    if (model.size() < offset + len) model.resize(offset + len, '\0');
    model.replace(offset, len, data);
    ASSERT_EQ(file->size(), model.size());
    if (op % 7 == 0) {
      // Read back through the writing handle: sees its own writes.
      const uint64_t at = rng() % model.size();
      const size_t want = 1 + rng() % (2 * kTestChunk);
      std::string got(want, '\x55');
      auto n = file->Read(at, got.data(), want);
      ASSERT_TRUE(n.ok()) << n.status();
      ASSERT_EQ(*n, std::min<uint64_t>(want, model.size() - at));
      got.resize(*n);
      ASSERT_TRUE(SameBytes(got, model.substr(at, *n))) << "op " << op << " at " << at;
    }
    if (op % 50 == 49) {
      ASSERT_TRUE(file->Close().ok());
      ASSERT_TRUE(SameBytes(ReadAll(ino), model));
      auto reopened = client_->Open(ino, O_RDWR);
      ASSERT_TRUE(reopened.ok());
      file = *std::move(reopened);
    }
  }
  ASSERT_TRUE(file->Close().ok());
  EXPECT_TRUE(SameBytes(ReadAll(ino), model));
}

TEST_F(FileIoTest, HolesReadAsZeros) {
  auto file = CreateFile("holes");
  const uint64_t ino = file->ino();
  const std::string tail = "tail bytes";
  const uint64_t at = 5ull * kTestChunk + 3;
  ASSERT_TRUE(file->Write(at, tail.data(), tail.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  std::string expected(at, '\0');
  expected += tail;
  EXPECT_TRUE(SameBytes(ReadAll(ino), expected));
  EXPECT_EQ(transport_->ChunkCount(ino), 1);  // nothing stored for the hole
}

TEST_F(FileIoTest, ReadsStopAtEndOfFile) {
  auto file = CreateFile("eof");
  const std::string data = RandomBytes(kTestChunk + 10, 3);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  char buf[100];
  auto n = file->Read(kTestChunk, buf, sizeof(buf));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 10u);
  EXPECT_EQ(std::string(buf, 10), data.substr(kTestChunk));
  n = file->Read(kTestChunk + 10, buf, sizeof(buf));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  n = file->Read(1ull << 40, buf, sizeof(buf));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST_F(FileIoTest, TruncateDownThenExtendReadsZeros) {
  auto file = CreateFile("trunc");
  const uint64_t ino = file->ino();
  const std::string data = RandomBytes(3ull * kTestChunk + 17, 9);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Close().ok());

  meta::SetAttrRequest request;
  request.set_ino(ino);
  request.set_valid(meta::SET_SIZE);
  request.set_size(kTestChunk / 2);
  auto attr = client_->SetAttr(request);
  ASSERT_TRUE(attr.ok()) << attr.status();
  EXPECT_EQ(attr->size(), kTestChunk / 2);
  EXPECT_TRUE(SameBytes(ReadAll(ino), data.substr(0, kTestChunk / 2)));

  // Extend by truncate, then by a write past the end: the gap is zeros.
  request.set_size(2ull * kTestChunk);
  ASSERT_TRUE(client_->SetAttr(request).ok());
  auto reopened = client_->Open(ino, O_RDWR);
  ASSERT_TRUE(reopened.ok());
  ASSERT_TRUE((*reopened)->Write(3ull * kTestChunk, "x", 1).ok());
  ASSERT_TRUE((*reopened)->Close().ok());
  std::string expected = data.substr(0, kTestChunk / 2);
  expected.resize(3ull * kTestChunk, '\0');
  expected += "x";
  EXPECT_TRUE(SameBytes(ReadAll(ino), expected));
}

TEST_F(FileIoTest, TruncateWhileOpenDropsBufferedBytes) {
  auto file = CreateFile("trunc-open");
  const uint64_t ino = file->ino();
  const std::string data = RandomBytes(kTestChunk + 500, 11);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());  // last 500 still buffered
  meta::SetAttrRequest request;
  request.set_ino(ino);
  request.set_valid(meta::SET_SIZE);
  request.set_size(kTestChunk + 100);
  ASSERT_TRUE(client_->SetAttr(request).ok());
  EXPECT_EQ(file->size(), kTestChunk + 100);
  ASSERT_TRUE(file->Write(kTestChunk + 300, "yz", 2).ok());
  ASSERT_TRUE(file->Close().ok());
  std::string expected = data.substr(0, kTestChunk + 100);
  expected.resize(kTestChunk + 300, '\0');
  expected += "yz";
  EXPECT_TRUE(SameBytes(ReadAll(ino), expected));
}

TEST_F(FileIoTest, CreateWithOTruncEmptiesStorageFirst) {
  auto file = CreateFile("otrunc");
  const uint64_t ino = file->ino();
  const std::string old_data = RandomBytes(4ull * kTestChunk, 12);
  ASSERT_TRUE(file->Write(0, old_data.data(), old_data.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  ASSERT_EQ(transport_->ChunkCount(ino), 4);

  auto created = client_->Create(kRootIno, "otrunc", 0644, 0, 0, O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(created->created);
  EXPECT_EQ(created->attr.size(), 0u);
  EXPECT_EQ(transport_->ChunkCount(ino), 0);  // trimmed before the service truncated
  EXPECT_EQ(meta_->RecordedSize(ino), 0u);
  // Rewrite shorter, unaligned: no old byte may survive.
  const std::string new_data = RandomBytes(kTestChunk + 3, 13);
  ASSERT_TRUE(created->file->Write(0, new_data.data(), new_data.size()).ok());
  ASSERT_TRUE(created->file->Close().ok());
  EXPECT_TRUE(SameBytes(ReadAll(ino), new_data));

  // Open(O_TRUNC) of an existing inode does the same.
  auto reopened = client_->Open(ino, O_WRONLY | O_TRUNC);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->size(), 0u);
  ASSERT_TRUE((*reopened)->Close().ok());
  EXPECT_TRUE(SameBytes(ReadAll(ino), ""));
  EXPECT_EQ(transport_->ChunkCount(ino), 0);
}

TEST_F(FileIoTest, OTruncClearsChunksACrashedWriterLeft) {
  auto created = client_->Create(kRootIno, "crashed", 0644, 0, 0, O_WRONLY | O_CREAT);
  ASSERT_TRUE(created.ok());
  const uint64_t ino = created->file->ino();
  const uint32_t server = created->attr.layout().stripe(0);
  ASSERT_TRUE(created->file->Close().ok());
  // A writer died after its chunk reached a server but before any commit:
  // the service says size 0, the server holds garbage.
  const std::string garbage(kTestChunk, 'G');
  ASSERT_TRUE(transport_->WriteChunk(server, ino, 0, 0, garbage.data(), garbage.size(), true).ok());
  auto reopened = client_->Create(kRootIno, "crashed", 0644, 0, 0, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_TRUE(reopened.ok());
  ASSERT_TRUE(reopened->file->Write(100, "0123456789", 10).ok());  // a merge write
  ASSERT_TRUE(reopened->file->Close().ok());
  std::string expected(100, '\0');
  expected += "0123456789";
  EXPECT_TRUE(SameBytes(ReadAll(ino), expected));
}

TEST_F(FileIoTest, ExclusiveCreateOfExistingFails) {
  ASSERT_NE(CreateFile("excl"), nullptr);
  auto again = client_->Create(kRootIno, "excl", 0644, 0, 0, O_RDWR | O_CREAT | O_EXCL);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(ErrnoFromStatus(again.status()), EEXIST);
}

TEST_F(FileIoTest, AppendWritesAtEndWhateverTheOffset) {
  auto file = CreateFile("append");
  const uint64_t ino = file->ino();
  ASSERT_TRUE(file->Write(0, "hello", 5).ok());
  ASSERT_TRUE(file->Close().ok());
  auto appender = client_->Open(ino, O_WRONLY | O_APPEND);
  ASSERT_TRUE(appender.ok());
  ASSERT_TRUE((*appender)->Write(0, " world", 6).ok());
  ASSERT_TRUE((*appender)->Write(2, "!", 1).ok());
  EXPECT_EQ((*appender)->size(), 12u);
  ASSERT_TRUE((*appender)->Close().ok());
  EXPECT_TRUE(SameBytes(ReadAll(ino), "hello world!"));
}

TEST_F(FileIoTest, TwoHandlesSeeEachOthersWritesAndSize) {
  auto writer = CreateFile("shared");
  const uint64_t ino = writer->ino();
  auto reader = client_->Open(ino, O_RDONLY);
  ASSERT_TRUE(reader.ok());
  const std::string data = RandomBytes(2ull * kTestChunk + 99, 21);
  ASSERT_TRUE(writer->Write(0, data.data(), data.size()).ok());
  // Not flushed yet, but this client knows the size and the bytes.
  EXPECT_EQ((*reader)->size(), data.size());
  auto attr = client_->GetAttr(ino);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->size(), data.size());
  EXPECT_EQ(meta_->RecordedSize(ino), 0u);
  std::string got(data.size(), '\0');
  auto n = (*reader)->Read(0, got.data(), got.size());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, data.size());
  EXPECT_TRUE(SameBytes(got, data));
  // And the other way round.
  auto second_writer = client_->Open(ino, O_RDWR);
  ASSERT_TRUE(second_writer.ok());
  ASSERT_TRUE((*second_writer)->Write(10, "ABC", 3).ok());
  char buf[3];
  ASSERT_TRUE(writer->Read(10, buf, 3).ok());
  EXPECT_EQ(std::string(buf, 3), "ABC");
  ASSERT_TRUE((*second_writer)->Close().ok());
  ASSERT_TRUE((*reader)->Close().ok());
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(meta_->RecordedSize(ino), data.size());
}

TEST_F(FileIoTest, ReopenSeesAnotherClientsTruncate) {
  auto file = CreateFile("shrunk");
  const uint64_t ino = file->ino();
  const std::string data = RandomBytes(2 * kTestChunk, 31);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Close().ok());  // closed, but the File (and its state) lives on
  // Another client truncates, straight at the service.
  meta::SetAttrRequest request;
  request.set_ino(ino);
  request.set_valid(meta::SET_SIZE);
  request.set_size(10);
  ASSERT_TRUE(meta_->SetAttr(request).ok());
  auto stat = client_->GetAttr(ino);
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->size(), 10u);  // no handle open here: the service's size
  auto reopened = client_->Open(ino, O_RDONLY);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->size(), 10u);  // close-to-open: the service's size
  auto attr = client_->GetAttr(ino);
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->size(), 10u);
}

// A truncate here trims storage at the file's real size, even when the
// local view of an open file predates another client's extension of it.
TEST_F(FileIoTest, TruncateKeepsAnotherClientsBytesBelowTheNewSize) {
  auto file = CreateFile("grown");
  const uint64_t ino = file->ino();
  ASSERT_TRUE(file->Write(0, "abc", 3).ok());
  ASSERT_TRUE(file->Close().ok());
  auto reader = client_->Open(ino, O_RDONLY);  // keeps the state (size 3) open
  ASSERT_TRUE(reader.ok());
  // Another client writes chunk 1 and commits a size of two chunks.
  auto attr = client_->GetAttr(ino);
  ASSERT_TRUE(attr.ok());
  const std::string other(kTestChunk, 'o');
  ASSERT_TRUE(transport_
                  ->WriteChunk(ServerForChunk(attr->layout(), 1), ino, 1, 0, other.data(),
                               other.size(), /*replace=*/true)
                  .ok());
  meta::CommitWriteRequest commit;
  commit.set_ino(ino);
  commit.set_size(2ull * kTestChunk);
  ASSERT_TRUE(meta_->CommitWrite(commit).ok());

  meta::SetAttrRequest request;
  request.set_ino(ino);
  request.set_valid(meta::SET_SIZE);
  request.set_size(2ull * kTestChunk - 10);
  ASSERT_TRUE(client_->SetAttr(request).ok());
  std::string expected("abc");
  expected.resize(kTestChunk, '\0');
  expected += other.substr(0, kTestChunk - 10);
  EXPECT_TRUE(SameBytes(ReadAll(ino), expected));
  ASSERT_TRUE((*reader)->Close().ok());
}

TEST_F(FileIoTest, ChunkSizeComesFromTheDirectory) {
  auto dir = client_->Mkdir(kRootIno, "small", 0755, 0, 0);
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(client_->SetXattr(dir->ino(), "user.ckptfs.chunk_size", "4096", 0).ok());
  auto created = client_->Create(dir->ino(), "f", 0644, 0, 0, O_RDWR | O_CREAT);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(created->attr.layout().chunk_size(), 4096u);
  const std::string data = RandomBytes(3 * 4096 + 5, 5);
  ASSERT_TRUE(created->file->Write(0, data.data(), data.size()).ok());
  const uint64_t ino = created->file->ino();
  ASSERT_TRUE(created->file->Close().ok());
  EXPECT_EQ(transport_->ChunkCount(ino), 4);
  EXPECT_TRUE(SameBytes(ReadAll(ino), data));
}

}  // namespace
}  // namespace ckptfs::client
