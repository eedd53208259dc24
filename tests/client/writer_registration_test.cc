// Writer registration of File handles (client/file.h) over the metadata
// service in-process: the sequence of Create / Open / CommitWrite the service
// sees, and the writers it has registered, so a checkpoint commit knows
// which files are still being written.
#include <fcntl.h>

#include <cerrno>
#include <set>
#include <string>
#include <vector>

#include "common/errno_status.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

using WriterRegistrationTest = ClientFixture;

std::set<uint64_t> Ids(std::initializer_list<uint64_t> ids) { return std::set<uint64_t>(ids); }

TEST_F(WriterRegistrationTest, CreateFlushReleaseSequence) {
  auto created = client_->Create(kRootIno, "f", 0644, 0, 0, O_WRONLY | O_CREAT);
  ASSERT_TRUE(created.ok());
  File& file = *created->file;
  const uint64_t id = file.writer_handle();
  ASSERT_NE(id, 0u);
  EXPECT_EQ(meta_->Registrations(), std::vector<uint64_t>{id});
  EXPECT_EQ(service_->WriterHandles(file.ino()), Ids({id}));

  ASSERT_TRUE(file.Write(0, "hello", 5).ok());
  ASSERT_TRUE(file.Flush().ok());
  // One CommitWrite both publishes the size and releases the handle.
  std::vector<meta::CommitWriteRequest> commits = meta_->CommitWrites();
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(commits[0].size(), 5u);
  EXPECT_EQ(commits[0].release_writer(), id);
  EXPECT_FALSE(commits[0].failed());
  EXPECT_TRUE(service_->WriterHandles(file.ino()).empty());

  // Released already and nothing new: close (FUSE release) sends nothing.
  ASSERT_TRUE(file.Close().ok());
  EXPECT_EQ(meta_->CommitWrites().size(), 1u);
  EXPECT_EQ(service_->RecordedSize(file.ino()), 5u);
}

TEST_F(WriterRegistrationTest, FlushReleasesEvenWithNothingWritten) {
  auto file = CreateFile("empty", O_RDWR | O_CREAT);
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(file->Flush().ok());
  std::vector<meta::CommitWriteRequest> commits = meta_->CommitWrites();
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(commits[0].release_writer(), file->writer_handle());
  EXPECT_EQ(commits[0].size(), 0u);
  EXPECT_EQ(commits[0].mtime_ns(), 0);  // a release alone changes no attribute
  EXPECT_TRUE(service_->WriterHandles(file->ino()).empty());
}

TEST_F(WriterRegistrationTest, WriteAfterFlushRegistersAgain) {
  // A dup'd descriptor: close(2) of one copy flushes, the other keeps writing.
  auto file = CreateFile("dup", O_WRONLY | O_CREAT);
  ASSERT_NE(file, nullptr);
  const uint64_t id = file->writer_handle();
  ASSERT_TRUE(file->Write(0, "ab", 2).ok());
  ASSERT_TRUE(file->Flush().ok());
  EXPECT_TRUE(service_->WriterHandles(file->ino()).empty());
  ASSERT_TRUE(file->Write(2, "cd", 2).ok());
  EXPECT_EQ(meta_->Registrations(), (std::vector<uint64_t>{id, id}));
  EXPECT_EQ(service_->WriterHandles(file->ino()), Ids({id}));
  ASSERT_TRUE(file->Close().ok());  // the release of a handle still registered
  EXPECT_TRUE(service_->WriterHandles(file->ino()).empty());
  std::vector<meta::CommitWriteRequest> commits = meta_->CommitWrites();
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_EQ(commits[1].release_writer(), id);
  EXPECT_EQ(commits[1].size(), 4u);
}

TEST_F(WriterRegistrationTest, FailedWriteMarksTheFileFailed) {
  auto file = CreateFile("bad", O_WRONLY | O_CREAT);
  ASSERT_NE(file, nullptr);
  transport_->FailWrites(EIO);
  const std::string data = RandomBytes(2 * kTestChunk, 4);
  (void)file->Write(0, data.data(), data.size());
  absl::Status flushed = file->Flush();
  EXPECT_EQ(ErrnoFromStatus(flushed), EIO);
  std::vector<meta::CommitWriteRequest> commits = meta_->CommitWrites();
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_TRUE(commits[0].failed());
  EXPECT_EQ(commits[0].release_writer(), file->writer_handle());
  EXPECT_EQ(commits[0].size(), 0u);  // no size is published for a failed file
  EXPECT_TRUE(service_->Damaged(file->ino()));
  EXPECT_TRUE(service_->WriterHandles(file->ino()).empty());
  EXPECT_EQ(service_->RecordedSize(file->ino()), 0u);
}

TEST_F(WriterRegistrationTest, ReleaseThatFailedIsSentAgainByClose) {
  auto file = CreateFile("retry", O_WRONLY | O_CREAT);
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(file->Write(0, "x", 1).ok());
  meta_->FailNext("CommitWrite", ErrnoStatus(EIO, "injected"));
  EXPECT_FALSE(file->Flush().ok());
  EXPECT_EQ(service_->WriterHandles(file->ino()), Ids({file->writer_handle()}));
  ASSERT_TRUE(file->Close().ok());
  EXPECT_TRUE(service_->WriterHandles(file->ino()).empty());
  EXPECT_EQ(service_->RecordedSize(file->ino()), 1u);
}

TEST_F(WriterRegistrationTest, ReadOnlyHandlesNeverRegister) {
  auto writer = CreateFile("r", O_WRONLY | O_CREAT);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Close().ok());
  const size_t registrations = meta_->Registrations().size();
  const size_t commits = meta_->CommitWrites().size();
  auto reader = client_->Open(writer->ino(), O_RDONLY);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->writer_handle(), 0u);
  ASSERT_TRUE((*reader)->Flush().ok());
  ASSERT_TRUE((*reader)->Close().ok());
  EXPECT_EQ(meta_->Registrations().size(), registrations);
  EXPECT_EQ(meta_->CommitWrites().size(), commits);
}

TEST_F(WriterRegistrationTest, EachHandleHasItsOwnId) {
  auto a = CreateFile("same", O_RDWR | O_CREAT);
  ASSERT_NE(a, nullptr);
  auto b = client_->Open(a->ino(), O_WRONLY);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->writer_handle(), (*b)->writer_handle());
  EXPECT_EQ(service_->WriterHandles(a->ino()), Ids({a->writer_handle(), (*b)->writer_handle()}));
  ASSERT_TRUE(a->Close().ok());
  EXPECT_EQ(service_->WriterHandles(a->ino()), Ids({(*b)->writer_handle()}));  // b still open
  ASSERT_TRUE((*b)->Close().ok());
  EXPECT_TRUE(service_->WriterHandles(a->ino()).empty());
}

TEST_F(WriterRegistrationTest, TruncationsRegisterOnlyWhileTheyRun) {
  auto file = CreateFile("t", O_WRONLY | O_CREAT);
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(file->Write(0, "abcdef", 6).ok());
  ASSERT_TRUE(file->Close().ok());
  // A read-only O_TRUNC open and a truncate(2) register a temporary writer
  // and release it before they return.
  auto reader = client_->Open(file->ino(), O_RDONLY | O_TRUNC);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->size(), 0u);
  EXPECT_TRUE(service_->WriterHandles(file->ino()).empty());
  meta::SetAttrRequest request;
  request.set_ino(file->ino());
  request.set_valid(meta::SET_SIZE);
  request.set_size(3);
  ASSERT_TRUE(client_->SetAttr(request).ok());
  EXPECT_TRUE(service_->WriterHandles(file->ino()).empty());
  const std::vector<uint64_t> registered = meta_->Registrations();
  // The create, the open (its id again with the truncation), the truncate.
  EXPECT_EQ(std::set<uint64_t>(registered.begin(), registered.end()).size(), 3u);
  ASSERT_TRUE((*reader)->Close().ok());
}

TEST_F(WriterRegistrationTest, ReadOnlyTruncatingCreateCannotTrimACommittedFile) {
  auto dir = client_->Mkdir(kRootIno, "ck", 0755, 0, 0);
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto created = client_->Create(dir->ino(), "f", 0644, 0, 0, O_WRONLY | O_CREAT);
  ASSERT_TRUE(created.ok()) << created.status();
  const uint64_t ino = created->file->ino();
  ASSERT_TRUE(created->file->Write(0, "abcdef", 6).ok());
  ASSERT_TRUE(created->file->Close().ok());
  ASSERT_TRUE(client_->DeclareCheckpoint(dir->ino(), 1).ok());
  auto committed = client_->CommitCheckpoint(dir->ino(), 0);
  ASSERT_TRUE(committed.ok()) << committed.status();

  // O_RDONLY | O_TRUNC of the existing file: refused before any trim.
  auto again = client_->Create(dir->ino(), "f", 0644, 0, 0, O_RDONLY | O_CREAT | O_TRUNC);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(ErrnoFromStatus(again.status()), EROFS) << again.status();
  EXPECT_EQ(ReadAll(ino), "abcdef");
  EXPECT_TRUE(service_->WriterHandles(ino).empty());
}

}  // namespace
}  // namespace ckptfs::client
