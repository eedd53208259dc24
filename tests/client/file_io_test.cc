// File data path over the in-process service and the fake transport
// (client_fixture.h): byte-exact write/read of files at chunk
// edges, random overwrites past the end against an in-memory model, holes,
// truncate, O_TRUNC, O_APPEND, and two handles of one inode; reads as
// views (ReadView) across chunk edges, holes and end of file, a view that
// stays exact while another handle overwrites its chunk, views past the
// cache's capacity, and many threads taking views of one file at once.
#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <vector>

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
  const uint64_t sizes[] = {0,
                            1,
                            kTestChunk - 1,
                            kTestChunk,
                            kTestChunk + 1,
                            3ull * kTestChunk + 17,
                            10ull * kTestChunk + 5};
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
    EXPECT_EQ(service_->RecordedSize(ino), size);  // close committed the size
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

// Only whole chunks replace: a file's partial last chunk merges, so bytes
// another client stored in that chunk past this client's end of file (it
// opened the file before they were written) survive this client's close.
TEST_F(FileIoTest, OnlyWholeChunksReplaceAndAPartialLastChunkMergesWithOthersBytes) {
  const std::string mine = RandomBytes(2 * kTestChunk + 1000, 11);
  auto file = CreateFile("shared");
  ASSERT_TRUE(file->Write(0, mine.data(), mine.size()).ok());
  // Another writer stored chunk 2 with 5000 bytes while ours was buffered.
  const std::string theirs = RandomBytes(5000, 12);
  auto attr = client_->GetAttr(file->ino());
  ASSERT_TRUE(attr.ok());
  const uint32_t server = attr->layout().stripe(2 % attr->layout().stripe_size());
  ASSERT_TRUE(
      transport_->WriteChunk(server, file->ino(), 2, 0, theirs.data(), theirs.size(), true).ok());
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(transport_->counts().writes, 4);
  EXPECT_EQ(transport_->counts().replace_writes, 3);  // chunks 0 and 1, and theirs
  auto chunk = transport_->ChunkBytes(server, file->ino(), 2);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_TRUE(SameBytes(*chunk, mine.substr(2 * kTestChunk) + theirs.substr(1000)));
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

// Chunk indexes past 2^32 - 1 cannot be written (EFBIG), only reached by a
// truncate: they read as zeros without a request, whose 32-bit index would
// name chunk index mod 2^32 (here: chunk 0, which holds data).
TEST_F(FileIoTest, PastTheLargestWritableFileReadsZerosWithoutAskingAServer) {
  auto file = CreateFile("huge");
  const uint64_t ino = file->ino();
  const std::string head = RandomBytes(100, 4);
  ASSERT_TRUE(file->Write(0, head.data(), head.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  const uint64_t far = (uint64_t{1} << 32) * kTestChunk;  // chunk index 2^32
  meta::SetAttrRequest request;
  request.set_ino(ino);
  request.set_valid(meta::SET_SIZE);
  request.set_size(far + 4096);
  ASSERT_TRUE(client_->SetAttr(request).ok());
  auto reopened = client_->Open(ino, O_RDONLY);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  std::string buf(4096, 'x');
  auto n = (*reopened)->Read(far, buf.data(), buf.size());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 4096u);
  EXPECT_EQ(buf, std::string(4096, '\0'));
  EXPECT_EQ(transport_->ReadsOf(ino, uint64_t{1} << 32), 0);
  ASSERT_TRUE((*reopened)->Close().ok());
}

// A read-cache budget of one chunk for the whole client: files read side
// by side still read back exactly (uncached, or through the one buffer).
// The budget's own bounds are ReadCacheTest's.
TEST_F(FileIoTest, ATinyReadBudgetSlowsReadersButNeverFailsThem) {
  ClientOptions options = DefaultOptions();
  options.read_cache_budget_bytes = kTestChunk;
  MakeClient(options);
  std::vector<std::string> datas;
  std::vector<uint64_t> inos;
  for (int f = 0; f < 3; ++f) {
    datas.push_back(RandomBytes(5 * kTestChunk + 100 * static_cast<size_t>(f), 40 + f));
    auto file = CreateFile("budget" + std::to_string(f));
    ASSERT_NE(file, nullptr);
    ASSERT_TRUE(file->Write(0, datas.back().data(), datas.back().size()).ok());
    inos.push_back(file->ino());
    ASSERT_TRUE(file->Close().ok());
  }
  std::vector<std::unique_ptr<File>> readers;
  for (uint64_t ino : inos) {
    auto file = client_->Open(ino, O_RDONLY);
    ASSERT_TRUE(file.ok()) << file.status();
    readers.push_back(*std::move(file));
  }
  std::vector<std::string> got(3);
  for (size_t at = 0; at < datas[2].size(); at += 10000) {
    for (size_t f = 0; f < 3; ++f) {
      if (at >= datas[f].size()) continue;
      std::string buf(10000, '\0');
      auto n = readers[f]->Read(at, buf.data(), buf.size());
      ASSERT_TRUE(n.ok()) << n.status();
      got[f] += buf.substr(0, *n);
    }
  }
  for (size_t f = 0; f < 3; ++f) {
    EXPECT_TRUE(SameBytes(got[f], datas[f])) << "file " << f;
    EXPECT_TRUE(readers[f]->Close().ok());
  }
}

// A file kept open after it was read holds read-cache buffers; once the
// budget is spent, a file read next takes them over (the idle file gives
// them up) instead of reading every piece uncached.
TEST_F(FileIoTest, AnIdleOpenFileGivesItsReadBudgetToAReaderThatNeedsIt) {
  ClientOptions options = DefaultOptions();
  options.read_cache_budget_bytes = 2 * kTestChunk;
  MakeClient(options);
  const std::string a_data = RandomBytes(5 * kTestChunk, 50);
  const std::string b_data = RandomBytes(5 * kTestChunk, 51);
  uint64_t inos[2] = {0, 0};
  for (int f = 0; f < 2; ++f) {
    auto file = CreateFile(f == 0 ? "idle" : "next");
    ASSERT_NE(file, nullptr);
    const std::string& data = f == 0 ? a_data : b_data;
    ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
    inos[f] = file->ino();
    ASSERT_TRUE(file->Close().ok());
  }
  auto idle = client_->Open(inos[0], O_RDONLY);
  ASSERT_TRUE(idle.ok());
  std::string buf(kTestChunk, '\0');
  for (uint64_t at = 0; at < a_data.size(); at += kTestChunk) {
    ASSERT_TRUE((*idle)->Read(at, buf.data(), buf.size()).ok());
  }
  // `idle` stays open, holding the budget. Read the other file in small
  // sequential pieces: each chunk should come from the server about once.
  auto next = client_->Open(inos[1], O_RDONLY);
  ASSERT_TRUE(next.ok());
  std::string got;
  for (uint64_t at = 0; at < b_data.size(); at += 8192) {
    auto n = (*next)->Read(at, buf.data(), 8192);
    ASSERT_TRUE(n.ok()) << n.status();
    got.append(buf.data(), *n);
  }
  EXPECT_TRUE(SameBytes(got, b_data));
  for (uint64_t chunk = 0; chunk < 5; ++chunk) {
    // Uncached, each of the 8 pieces of a chunk would be a read of its own.
    EXPECT_LE(transport_->ReadsOf(inos[1], chunk), 2) << "chunk " << chunk;
  }
  EXPECT_TRUE((*next)->Close().ok());
  EXPECT_TRUE((*idle)->Close().ok());
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
  EXPECT_EQ(service_->RecordedSize(ino), 0u);
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
  EXPECT_EQ(service_->RecordedSize(ino), 0u);
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
  EXPECT_EQ(service_->RecordedSize(ino), data.size());
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

// Another client rewrites the file in place with the same size and mtime
// (a restore that sets the mtime back): only the service-set ctime shows
// it, and a reopen here must not serve the chunks it had cached.
TEST_F(FileIoTest, ReopenSeesARewriteInPlaceThatKeepsSizeAndMtime) {
  auto file = CreateFile("rewritten");
  const uint64_t ino = file->ino();
  const std::string first(kTestChunk, 'a');
  ASSERT_TRUE(file->Write(0, first.data(), first.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  auto reader = client_->Open(ino, O_RDONLY);  // holds the state and its cache
  ASSERT_TRUE(reader.ok());
  std::string seen(kTestChunk, '\0');
  ASSERT_TRUE((*reader)->Read(0, seen.data(), seen.size()).ok());
  ASSERT_EQ(seen, first);

  auto before = client_->GetAttr(ino);
  ASSERT_TRUE(before.ok());
  const std::string second(kTestChunk, 'b');
  ASSERT_TRUE(transport_
                  ->WriteChunk(ServerForChunk(before->layout(), 0), ino, 0, 0, second.data(),
                               second.size(), /*replace=*/true)
                  .ok());
  meta::CommitWriteRequest commit;
  commit.set_ino(ino);
  commit.set_size(kTestChunk);
  commit.set_mtime_ns(before->mtime_ns());
  ASSERT_TRUE(meta_->CommitWrite(commit).ok());

  auto reopened = client_->Open(ino, O_RDONLY);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->opened_version().size, before->size());
  EXPECT_EQ((*reopened)->opened_version().mtime_ns, before->mtime_ns());
  EXPECT_NE((*reopened)->opened_version().ctime_ns, before->ctime_ns());
  ASSERT_TRUE((*reopened)->Read(0, seen.data(), seen.size()).ok());
  EXPECT_EQ(seen, second) << "served the chunk cached before the rewrite";
  ASSERT_TRUE((*reopened)->Close().ok());
  ASSERT_TRUE((*reader)->Close().ok());
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

// The bytes of a view, in order.
std::string Bytes(const ReadView& view) {
  std::string out;
  for (const struct iovec& span : view.spans()) {
    out.append(static_cast<const char*>(span.iov_base), span.iov_len);
  }
  EXPECT_EQ(out.size(), view.size());
  return out;
}

TEST_F(FileIoTest, ViewsAcrossChunkEdgesHolesAndEndOfFile) {
  // Chunk 0 written, chunk 1 a hole, chunk 2 written up to the end of file.
  auto file = CreateFile("view-edges");
  const uint64_t ino = file->ino();
  std::string model = RandomBytes(kTestChunk, 41);
  model.resize(2ull * kTestChunk, '\0');
  const std::string tail = RandomBytes(kTestChunk / 2, 42);
  model += tail;
  ASSERT_TRUE(file->Write(0, model.data(), kTestChunk).ok());
  ASSERT_TRUE(file->Write(2ull * kTestChunk, tail.data(), tail.size()).ok());
  ASSERT_TRUE(file->Close().ok());

  for (bool sequential : {true, false}) {
    SCOPED_TRACE(sequential ? "through the cache" : "straight from the servers");
    auto reader = client_->Open(ino, O_RDONLY);
    ASSERT_TRUE(reader.ok());
    struct Case {
      uint64_t offset;
      size_t len;
      size_t spans;  // one per chunk touched
    };
    const Case cases[] = {
        {0, 1000, 1},                             // inside a chunk
        {kTestChunk - 100, 300, 2},               // chunk edge, into the hole
        {kTestChunk + 5, 100, 1},                 // inside the hole
        {kTestChunk / 2, 2ull * kTestChunk, 3},   // three chunks
        {2ull * kTestChunk + 10, kTestChunk, 1},  // past the end: short
        {0, 4ull * kTestChunk, 3},                // the whole file
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.offset);
      // An empty read sets where the handle's sequential stream continues:
      // right here, or far away (then the read goes straight to the
      // servers: one handle, not sequential).
      auto restart = [&] {
        ASSERT_TRUE((*reader)->View(sequential ? c.offset : 1ull << 40, 0).ok());
      };
      restart();
      auto view = (*reader)->View(c.offset, c.len);
      ASSERT_TRUE(view.ok()) << view.status();
      const size_t want = std::min<uint64_t>(c.len, model.size() - c.offset);
      EXPECT_EQ(view->size(), want);
      EXPECT_EQ(view->spans().size(), c.spans);
      EXPECT_TRUE(SameBytes(Bytes(*view), model.substr(c.offset, want)));
      // Read gives the same bytes.
      restart();
      std::string copied(c.len, '\x55');
      auto n = (*reader)->Read(c.offset, copied.data(), c.len);
      ASSERT_TRUE(n.ok());
      copied.resize(*n);
      EXPECT_TRUE(SameBytes(copied, model.substr(c.offset, want)));
    }
    // At and past the end of file: empty views.
    for (uint64_t at : {static_cast<uint64_t>(model.size()), uint64_t{1} << 40}) {
      auto empty = (*reader)->View(at, 100);
      ASSERT_TRUE(empty.ok());
      EXPECT_EQ(empty->size(), 0u);
      EXPECT_TRUE(empty->spans().empty());
    }
    ASSERT_TRUE((*reader)->Close().ok());
    auto closed = (*reader)->View(0, 10);
    ASSERT_FALSE(closed.ok());
    EXPECT_EQ(ErrnoFromStatus(closed.status()), EBADF);
  }
}

TEST_F(FileIoTest, ViewSeesTheHandlesOwnUnflushedWrites) {
  auto file = CreateFile("view-own");
  const std::string data = RandomBytes(kTestChunk + 300, 43);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());  // the tail is buffered
  auto view = file->View(kTestChunk - 50, 400);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(SameBytes(Bytes(*view), data.substr(kTestChunk - 50)));
  ASSERT_TRUE(file->Close().ok());
}

TEST_F(FileIoTest, ViewStaysExactWhileAnotherHandleOverwritesItsChunk) {
  auto file = CreateFile("view-overwrite");
  const uint64_t ino = file->ino();
  const std::string old_data = RandomBytes(2ull * kTestChunk, 44);
  ASSERT_TRUE(file->Write(0, old_data.data(), old_data.size()).ok());
  ASSERT_TRUE(file->Close().ok());

  auto reader = client_->Open(ino, O_RDONLY);
  auto writer = client_->Open(ino, O_RDWR);
  ASSERT_TRUE(reader.ok() && writer.ok());
  auto old_view = (*reader)->View(100, kTestChunk - 200);  // cached: two handles are open
  ASSERT_TRUE(old_view.ok());
  const std::string old_bytes = old_data.substr(100, kTestChunk - 200);
  ASSERT_TRUE(SameBytes(Bytes(*old_view), old_bytes));
  EXPECT_EQ(transport_->ReadsOf(ino, 0), 1);

  // The other handle rewrites chunk 0 and flushes: the cached chunk is
  // dropped, and the reader's next read fetches it again.
  const std::string new_data = RandomBytes(kTestChunk, 45);
  ASSERT_TRUE((*writer)->Write(0, new_data.data(), new_data.size()).ok());
  ASSERT_TRUE((*writer)->Flush().ok());
  auto new_view = (*reader)->View(100, kTestChunk - 200);
  ASSERT_TRUE(new_view.ok());
  EXPECT_TRUE(SameBytes(Bytes(*new_view), new_data.substr(100, kTestChunk - 200)));
  EXPECT_EQ(transport_->ReadsOf(ino, 0), 2);
  EXPECT_NE(new_view->spans()[0].iov_base, old_view->spans()[0].iov_base);
  // Fill the cache's buffers with other chunks meanwhile: none may reuse
  // the pinned one.
  for (int i = 0; i < 30; ++i) {
    const std::string more = RandomBytes(kTestChunk, 100 + i);
    ASSERT_TRUE((*writer)->Write(0, more.data(), more.size()).ok());
    ASSERT_TRUE((*writer)->Flush().ok());
    auto again = (*reader)->View(0, kTestChunk);
    ASSERT_TRUE(again.ok());
    ASSERT_TRUE(SameBytes(Bytes(*again), more));
  }
  EXPECT_TRUE(SameBytes(Bytes(*old_view), old_bytes));

  // Destroyed after its file's handles close: still fine.
  ASSERT_TRUE((*writer)->Close().ok());
  ASSERT_TRUE((*reader)->Close().ok());
  EXPECT_TRUE(SameBytes(Bytes(*old_view), old_bytes));
  *old_view = ReadView();
  *new_view = std::move(*old_view);  // move-assigning an empty view ends new_view
  EXPECT_EQ(new_view->size(), 0u);
}

TEST_F(FileIoTest, ViewsHeldPastTheCacheCapacityReadStraightFromServers) {
  constexpr uint64_t kChunks = 12;  // the cache of one handle holds 3 + 4
  auto file = CreateFile("view-many");
  const uint64_t ino = file->ino();
  const std::string data = RandomBytes(kChunks * kTestChunk, 46);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  auto reader = client_->Open(ino, O_RDONLY);
  ASSERT_TRUE(reader.ok());
  std::vector<ReadView> views;
  for (uint64_t c = 0; c < kChunks; ++c) {
    auto view = (*reader)->View(c * kTestChunk, kTestChunk);
    ASSERT_TRUE(view.ok()) << view.status();
    views.push_back(*std::move(view));
  }
  for (uint64_t c = 0; c < kChunks; ++c) {
    EXPECT_TRUE(SameBytes(Bytes(views[c]), data.substr(c * kTestChunk, kTestChunk)))
        << "chunk " << c;
  }
  views.clear();
  // Every pin ended: the cache works as before.
  auto again = (*reader)->View(0, 3 * kTestChunk);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(SameBytes(Bytes(*again), data.substr(0, 3 * kTestChunk)));
  ASSERT_TRUE((*reader)->Close().ok());
}

TEST_F(FileIoTest, ManyThreadsTakeViewsOfOneFile) {
  constexpr int kThreads = 8;
  constexpr uint64_t kChunks = 20;
  auto file = CreateFile("view-threads");
  const uint64_t ino = file->ino();
  const std::string data = RandomBytes(kChunks * kTestChunk - 77, 47);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  std::vector<std::unique_ptr<File>> handles;
  for (int i = 0; i < kThreads; ++i) {
    auto opened = client_->Open(ino, O_RDONLY);
    ASSERT_TRUE(opened.ok());
    handles.push_back(*std::move(opened));
  }
  std::atomic<int> mismatches{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      // Odd-sized reads that straddle chunk edges, each thread keeping its
      // last three views alive (pins held while others read), and a few
      // random jumps; the first half of the threads read the file twice.
      std::mt19937 rng(500 + i);
      std::deque<std::pair<uint64_t, ReadView>> held;
      const size_t step = 40000 + 3001 * i;
      for (int pass = 0; pass < (i < kThreads / 2 ? 2 : 1); ++pass) {
        for (uint64_t at = 0; at < data.size(); at += step) {
          const uint64_t offset = rng() % 8 == 0 ? rng() % data.size() : at;
          auto view = handles[i]->View(offset, step);
          if (!view.ok()) {
            ++failures;
            return;
          }
          const size_t want = std::min<uint64_t>(step, data.size() - offset);
          if (view->size() != want || Bytes(*view) != data.substr(offset, want)) ++mismatches;
          held.emplace_back(offset, *std::move(view));
          if (held.size() > 3) {
            // Still exact after other threads' reads and evictions.
            const auto& [old_offset, old_view] = held.front();
            if (Bytes(old_view) != data.substr(old_offset, old_view.size())) ++mismatches;
            held.pop_front();
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  for (auto& handle : handles) ASSERT_TRUE(handle->Close().ok());
  EXPECT_TRUE(SameBytes(ReadAll(ino), data));
}

TEST_F(FileIoTest, ChunkSizeComesFromTheDirectory) {
  constexpr uint32_t kChunk = 2 * kTestChunk;
  auto dir = client_->Mkdir(kRootIno, "larger", 0755, 0, 0);
  ASSERT_TRUE(dir.ok());
  // A power of two from 64 KiB to 64 MiB.
  EXPECT_EQ(ErrnoFromStatus(client_->SetXattr(dir->ino(), "user.ckptfs.chunk_size", "4096", 0)),
            EINVAL);
  ASSERT_TRUE(
      client_->SetXattr(dir->ino(), "user.ckptfs.chunk_size", std::to_string(kChunk), 0).ok());
  auto created = client_->Create(dir->ino(), "f", 0644, 0, 0, O_RDWR | O_CREAT);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(created->attr.layout().chunk_size(), kChunk);
  const std::string data = RandomBytes(3 * kChunk + 5, 5);
  ASSERT_TRUE(created->file->Write(0, data.data(), data.size()).ok());
  const uint64_t ino = created->file->ino();
  ASSERT_TRUE(created->file->Close().ok());
  EXPECT_EQ(transport_->ChunkCount(ino), 4);
  EXPECT_TRUE(SameBytes(ReadAll(ino), data));
}

}  // namespace
}  // namespace ckptfs::client
