// Failure and flow-control behaviour of the file path over the in-process
// service and the fake transport (client_fixture.h):
// storage failures surface in Write/Flush/Close (never silently), the
// in-flight cap holds, read-ahead fetches each chunk once, fsync syncs each
// server that got chunks, commits happen only when something was written,
// and bad names fail before any RPC.
#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/file.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

class FileErrorsTest : public ClientFixture {};

TEST_F(FileErrorsTest, WriteFailureSurfacesInFlushWriteAndClose) {
  auto file = CreateFile("fails");
  const uint64_t ino = file->ino();
  transport_->FailWrites(EIO);
  const std::string data = RandomBytes(3ull * kTestChunk + 5, 1);
  // The writes are accepted into buffers; the failure arrives asynchronously.
  (void)file->Write(0, data.data(), data.size());
  absl::Status flushed = file->Flush();
  ASSERT_FALSE(flushed.ok());
  EXPECT_EQ(ErrnoFromStatus(flushed), EIO);
  // Sticky: the next write and the close report it too.
  auto written = file->Write(data.size(), "x", 1);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(ErrnoFromStatus(written.status()), EIO);
  absl::Status closed = file->Close();
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(ErrnoFromStatus(closed), EIO);
  EXPECT_EQ(file->Close().code(), closed.code());  // idempotent
  // Nothing was committed as if it had worked: the only commits release the
  // writer and mark the file failed.
  EXPECT_EQ(service_->RecordedSize(ino), 0u);
  for (const meta::CommitWriteRequest& commit : meta_->CommitWrites()) {
    EXPECT_EQ(commit.size(), 0u);
    EXPECT_TRUE(commit.failed());
  }
}

TEST_F(FileErrorsTest, LateFailureSurfacesInCloseWithItsErrno) {
  auto file = CreateFile("enospc");
  transport_->FailWrites(ENOSPC, /*after=*/3);
  const std::string data = RandomBytes(8ull * kTestChunk, 2);
  for (size_t done = 0; done < data.size(); done += kTestChunk) {
    auto written = file->Write(done, data.data() + done, kTestChunk);
    if (!written.ok()) {
      EXPECT_EQ(ErrnoFromStatus(written.status()), ENOSPC);
      break;
    }
  }
  absl::Status closed = file->Close();
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(ErrnoFromStatus(closed), ENOSPC);
}

TEST_F(FileErrorsTest, TransportFailuresReadAsEio) {
  auto file = CreateFile("refused");
  transport_->FailWrites(ECONNREFUSED);
  ASSERT_TRUE(file->Write(0, "abc", 3).ok());
  absl::Status closed = file->Close();
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(ErrnoFromStatus(closed), EIO);
  EXPECT_NE(closed.message().find("injected write failure"), absl::string_view::npos) << closed;
  transport_->FailWrites(0);
  // The failed close was the last: a new open starts afresh, from what the
  // service holds (nothing).
  auto rewriter = client_->Open(file->ino(), O_RDWR);
  ASSERT_TRUE(rewriter.ok());
  EXPECT_EQ((*rewriter)->size(), 0u);
  ASSERT_TRUE((*rewriter)->Write(0, "xyz", 3).ok());
  ASSERT_TRUE((*rewriter)->Close().ok());
  transport_->FailReads(ECONNRESET);
  auto reader = client_->Open(file->ino(), O_RDONLY);
  ASSERT_TRUE(reader.ok());
  char buf[3];
  auto n = (*reader)->Read(0, buf, 3);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(ErrnoFromStatus(n.status()), EIO);
  transport_->FailTrims(ETIMEDOUT);
  meta::SetAttrRequest request;
  request.set_ino(file->ino());
  request.set_valid(meta::SET_SIZE);
  request.set_size(0);
  EXPECT_EQ(ErrnoFromStatus(client_->SetAttr(request).status()), EIO);
}

TEST_F(FileErrorsTest, CommitFailureIsReportedAndRetried) {
  auto file = CreateFile("commit");
  const uint64_t ino = file->ino();
  ASSERT_TRUE(file->Write(0, "abc", 3).ok());
  meta_->FailNext("CommitWrite", ErrnoStatus(EIO, "injected"));
  absl::Status flushed = file->Flush();
  ASSERT_FALSE(flushed.ok());
  EXPECT_EQ(ErrnoFromStatus(flushed), EIO);
  EXPECT_EQ(service_->RecordedSize(ino), 0u);
  ASSERT_TRUE(file->Close().ok());  // commits again
  EXPECT_EQ(service_->RecordedSize(ino), 3u);
}

TEST_F(FileErrorsTest, FlushPublishesSizeOnlyAfterWrites) {
  // A flush of a writer always releases its registration (one CommitWrite);
  // only one after writes carries a size and mtime.
  auto published = [&] {
    int n = 0;
    for (const meta::CommitWriteRequest& commit : meta_->CommitWrites()) {
      if (commit.mtime_ns() != 0) ++n;
    }
    return n;
  };
  auto file = CreateFile("commits");
  ASSERT_TRUE(file->Flush().ok());
  EXPECT_EQ(published(), 0);
  ASSERT_TRUE(file->Write(0, "a", 1).ok());
  ASSERT_TRUE(file->Flush().ok());
  ASSERT_TRUE(file->Flush().ok());
  EXPECT_EQ(published(), 1);
  EXPECT_EQ(meta_->Calls("CommitWrite"), 2);  // the second flush had nothing to send
  ASSERT_TRUE(file->Write(1, "b", 1).ok());
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(published(), 2);
}

TEST_F(FileErrorsTest, InflightCapIsRespected) {
  ClientOptions options = DefaultOptions();
  options.max_inflight_chunks_per_file = 3;
  options.io_threads = 12;
  MakeClient(options);
  transport_->SetDelay(absl::Milliseconds(15));
  auto file = CreateFile("cap");
  const std::string data = RandomBytes(16ull * kTestChunk, 3);
  for (size_t done = 0; done < data.size(); done += 8192) {
    ASSERT_TRUE(file->Write(done, data.data() + done, 8192).ok());
  }
  ASSERT_TRUE(file->Close().ok());
  const auto counts = transport_->counts();
  EXPECT_EQ(counts.writes, 16);
  EXPECT_LE(counts.max_inflight_writes, 3);
  EXPECT_GE(counts.max_inflight_writes, 2);  // and they do overlap
  transport_->SetDelay(absl::ZeroDuration());
  EXPECT_TRUE(SameBytes(ReadAll(file->ino()), data));
}

TEST_F(FileErrorsTest, WriteBufferBudgetBoundsAllFilesTogether) {
  ClientOptions options = DefaultOptions();
  options.max_inflight_chunks_per_file = 4;
  options.write_buffer_budget_bytes = 2 * kTestChunk;  // two extra buffers in all
  MakeClient(options);
  transport_->SetDelay(absl::Milliseconds(10));
  constexpr int kFiles = 3;
  std::vector<std::string> data;
  std::vector<uint64_t> inos(kFiles);
  for (int i = 0; i < kFiles; ++i) data.push_back(RandomBytes(8ull * kTestChunk, 40 + i));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < kFiles; ++i) {
    threads.emplace_back([&, i] {
      auto created =
          client_->Create(kRootIno, "b" + std::to_string(i), 0644, 0, 0, O_WRONLY | O_CREAT);
      if (!created.ok()) {
        ++failures;
        return;
      }
      inos[i] = created->file->ino();
      for (size_t done = 0; done < data[i].size(); done += 16384) {
        if (!created->file->Write(done, data[i].data() + done, 16384).ok()) ++failures;
      }
      if (!created->file->Close().ok()) ++failures;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  // One buffer per file plus the two of the budget: never more in flight.
  EXPECT_LE(transport_->counts().max_inflight_writes, kFiles + 2);
  transport_->SetDelay(absl::ZeroDuration());
  for (int i = 0; i < kFiles; ++i) EXPECT_TRUE(SameBytes(ReadAll(inos[i]), data[i]));
}

TEST_F(FileErrorsTest, SequentialReaderFetchesEachChunkOnce) {
  auto file = CreateFile("readahead");
  const uint64_t ino = file->ino();
  const std::string data = RandomBytes(12ull * kTestChunk + 700, 4);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  transport_->SetDelay(absl::Milliseconds(2));
  const int reads_before = transport_->counts().reads;
  auto reader = client_->Open(ino, O_RDONLY);
  ASSERT_TRUE(reader.ok());
  std::string got(data.size(), '\0');
  for (size_t done = 0; done < got.size();) {
    auto n = (*reader)->Read(done, got.data() + done, 16384);
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_GT(*n, 0u);
    done += *n;
  }
  EXPECT_TRUE(SameBytes(got, data));
  for (uint64_t c = 0; c < 13; ++c) EXPECT_EQ(transport_->ReadsOf(ino, c), 1) << "chunk " << c;
  EXPECT_EQ(transport_->counts().reads - reads_before, 13);
  ASSERT_TRUE((*reader)->Close().ok());
}

TEST_F(FileErrorsTest, ReadFailureIsReturned) {
  auto file = CreateFile("readfail");
  ASSERT_TRUE(file->Write(0, "data", 4).ok());
  ASSERT_TRUE(file->Close().ok());
  transport_->FailReads(EIO);
  auto reader = client_->Open(file->ino(), O_RDONLY);
  ASSERT_TRUE(reader.ok());
  char buf[4];
  auto n = (*reader)->Read(0, buf, 4);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(ErrnoFromStatus(n.status()), EIO);
}

TEST_F(FileErrorsTest, FsyncSyncsEveryServerThatGotChunks) {
  auto file = CreateFile("fsync");
  const uint64_t ino = file->ino();
  const std::string data = RandomBytes(2ull * kTestChunk, 6);  // chunks 0 and 1
  // The CommitWrite requests that asked for a durable commit.
  auto durable = [&] {
    std::vector<meta::CommitWriteRequest> asked;
    for (const meta::CommitWriteRequest& commit : meta_->CommitWrites()) {
      if (commit.durable()) asked.push_back(commit);
    }
    return asked;
  };
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  EXPECT_TRUE(durable().empty());  // nothing asked for durability yet
  ASSERT_TRUE(file->Fsync().ok());
  EXPECT_EQ(service_->RecordedSize(ino), data.size());
  // The size is committed durably too, not only the bytes.
  ASSERT_EQ(durable().size(), 1u);
  EXPECT_EQ(durable()[0].ino(), ino);
  EXPECT_EQ(durable()[0].size(), data.size());
  auto attr = client_->GetAttr(ino);
  ASSERT_TRUE(attr.ok());
  const auto& stripe = attr->layout().stripe();
  EXPECT_EQ(transport_->SyncsOf(stripe[0], ino), 1);
  EXPECT_EQ(transport_->SyncsOf(stripe[1], ino), 1);
  EXPECT_EQ(transport_->SyncsOf(stripe[2], ino), 0);  // got no chunk
  // Nothing new: no more syncs.
  ASSERT_TRUE(file->Fsync().ok());
  EXPECT_EQ(transport_->counts().syncs, 2);
  // A failing sync is reported.
  ASSERT_TRUE(file->Write(0, "z", 1).ok());
  transport_->FailSyncs(EIO);
  absl::Status synced = file->Fsync();
  ASSERT_FALSE(synced.ok());
  EXPECT_EQ(ErrnoFromStatus(synced), EIO);
  transport_->FailSyncs(0);
  EXPECT_TRUE(file->Fsync().ok());  // and retried
}

TEST_F(FileErrorsTest, ReclaimedChunksOfADeletedOpenFileAreAnErrorNotZeros) {
  auto writer = CreateFile("doomed");
  const uint64_t ino = writer->ino();
  // Long enough that the chunk read last is outside any read-ahead window.
  const std::string data = RandomBytes(8ull * kTestChunk, 11);
  ASSERT_TRUE(writer->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(writer->Close().ok());
  auto reader = client_->Open(ino, O_RDONLY);
  ASSERT_TRUE(reader.ok());
  std::string back(kTestChunk, '\0');
  ASSERT_TRUE((*reader)->Read(0, back.data(), back.size()).ok());  // still linked: fine
  // The name goes, then the metadata service's reclaimer trims every chunk.
  ASSERT_TRUE(client_->Unlink(kRootIno, "doomed").ok());
  auto attr = meta_->GetAttr([&] {
    meta::InodeRequest r;
    r.set_ino(ino);
    return r;
  }());
  ASSERT_TRUE(attr.ok());
  for (uint32_t server : attr->attr().layout().stripe()) {
    ASSERT_TRUE(transport_->TrimChunks(server, ino, 0, kTestChunk).ok());
  }
  auto n = (*reader)->Read(7ull * kTestChunk, back.data(), back.size());
  ASSERT_FALSE(n.ok()) << "a reclaimed chunk must not read as zeros";
  EXPECT_EQ(ErrnoFromStatus(n.status()), EIO);
  EXPECT_NE(n.status().message().find("deleted"), absl::string_view::npos) << n.status();
}

TEST_F(FileErrorsTest, ReaderCloseDoesNotWaitForWriters) {
  auto writer = CreateFile("busy");
  auto reader = client_->Open(writer->ino(), O_RDONLY);
  ASSERT_TRUE(reader.ok());
  transport_->SetDelay(absl::Seconds(5));
  const std::string chunk = RandomBytes(kTestChunk, 8);
  ASSERT_TRUE(writer->Write(0, chunk.data(), chunk.size()).ok());  // in flight now
  const absl::Time start = absl::Now();
  ASSERT_TRUE((*reader)->Close().ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));  // not the writer's 5 s
  EXPECT_EQ(meta_->Calls("CommitWrite"), 0);         // and commits nothing
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(service_->RecordedSize(writer->ino()), chunk.size());
}

TEST_F(FileErrorsTest, WriteOnReadOnlyHandleIsEbadf) {
  auto file = CreateFile("ro");
  ASSERT_TRUE(file->Close().ok());
  auto reader = client_->Open(file->ino(), O_RDONLY);
  ASSERT_TRUE(reader.ok());
  auto written = (*reader)->Write(0, "x", 1);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(ErrnoFromStatus(written.status()), EBADF);
  ASSERT_TRUE((*reader)->Close().ok());
  auto after_close = (*reader)->Read(0, nullptr, 0);
  EXPECT_EQ(ErrnoFromStatus(after_close.status()), EBADF);
}

TEST_F(FileErrorsTest, BadNamesFailBeforeAnyRpc) {
  const std::string long_name(256, 'a');
  auto looked = client_->Lookup(kRootIno, long_name);
  EXPECT_EQ(ErrnoFromStatus(looked.status()), ENAMETOOLONG);
  auto created = client_->Create(kRootIno, long_name, 0644, 0, 0, O_CREAT | O_RDWR);
  EXPECT_EQ(ErrnoFromStatus(created.status()), ENAMETOOLONG);
  auto made = client_->Mkdir(kRootIno, "a/b", 0755, 0, 0);
  EXPECT_EQ(ErrnoFromStatus(made.status()), EINVAL);
  EXPECT_EQ(ErrnoFromStatus(client_->Unlink(kRootIno, "..")), EINVAL);
  EXPECT_EQ(ErrnoFromStatus(client_->Rename(kRootIno, "x", kRootIno, "", false)), EINVAL);
  EXPECT_EQ(meta_->Calls("Lookup") + meta_->Calls("Create") + meta_->Calls("Mkdir") +
                meta_->Calls("Unlink") + meta_->Calls("Rename"),
            0);
}

TEST_F(FileErrorsTest, OpenOfDirectoryIsEisdir) {
  auto dir = client_->Mkdir(kRootIno, "d", 0755, 0, 0);
  ASSERT_TRUE(dir.ok());
  auto opened = client_->Open(dir->ino(), O_RDONLY);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(ErrnoFromStatus(opened.status()), EISDIR);
}

}  // namespace
}  // namespace ckptfs::client
