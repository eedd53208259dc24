// Reader holds of File handles (client/reader_hold.h) over the metadata
// service in-process: a read-only open of a checkpoint's file asks the
// service to hold the file, Close releases exactly that hold once, handles
// that may write never ask, files outside checkpoints are not held, and a
// release that fails leaves the close successful.
#include <fcntl.h>

#include <cerrno>
#include <memory>
#include <set>
#include <string>

#include "common/errno_status.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

class ReaderHoldTest : public ClientFixture {
 protected:
  void SetUp() override {
    ClientFixture::SetUp();
    auto step = client_->Mkdir(kRootIno, "step", 0755, 0, 0);
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_TRUE(client_->DeclareCheckpoint(step->ino(), 1).ok());
    step_ = step->ino();
  }

  // Creates (or opens) `name` in the checkpoint with `flags`.
  std::unique_ptr<File> CreateInCheckpoint(const std::string& name, int flags) {
    auto created = client_->Create(step_, name, 0644, 0, 0, flags);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? std::move(created->file) : nullptr;
  }

  uint64_t step_ = 0;  // a pending checkpoint
};

TEST_F(ReaderHoldTest, EachReadOnlyHandleHoldsTheFileUntilItCloses) {
  auto writer = CreateInCheckpoint("shard", O_WRONLY | O_CREAT);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_TRUE(service_->ReaderHandles(writer->ino()).empty());

  auto a = client_->Open(writer->ino(), O_RDONLY);
  auto b = client_->Open(writer->ino(), O_RDONLY);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(service_->ReaderHandles(writer->ino()).size(), 2u);
  ASSERT_TRUE((*a)->Close().ok());
  EXPECT_EQ(service_->ReaderHandles(writer->ino()).size(), 1u);
  ASSERT_TRUE((*a)->Close().ok());  // a second Close releases nothing more
  EXPECT_EQ(meta_->Calls("ReleaseReader"), 1);
  b->reset();  // destroying an open handle closes it
  EXPECT_TRUE(service_->ReaderHandles(writer->ino()).empty());
  EXPECT_EQ(meta_->Calls("ReleaseReader"), 2);
}

TEST_F(ReaderHoldTest, HandlesThatMayWriteHoldNothing) {
  auto file = CreateInCheckpoint("rw", O_RDWR | O_CREAT);
  ASSERT_NE(file, nullptr);
  auto again = client_->Open(file->ino(), O_RDWR);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(service_->ReaderHandles(file->ino()).empty());
  ASSERT_TRUE((*again)->Close().ok());
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(meta_->Calls("ReleaseReader"), 0);
}

TEST_F(ReaderHoldTest, ReadOnlyOpensOutsideCheckpointsHoldNothing) {
  // Only a checkpoint is removed whole while its files are read.
  auto writer = CreateFile("plain", O_WRONLY | O_CREAT);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Close().ok());
  auto reader = client_->Open(writer->ino(), O_RDONLY);
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE(service_->ReaderHandles(writer->ino()).empty());
  ASSERT_TRUE((*reader)->Close().ok());
  EXPECT_EQ(meta_->Calls("ReleaseReader"), 0);
}

TEST_F(ReaderHoldTest, AFailedReleaseDoesNotFailTheClose) {
  auto writer = CreateInCheckpoint("f", O_WRONLY | O_CREAT);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Close().ok());
  auto reader = client_->Open(writer->ino(), O_RDONLY);
  ASSERT_TRUE(reader.ok());
  meta_->FailNext("ReleaseReader", ErrnoStatus(EIO, "injected"));
  EXPECT_TRUE((*reader)->Close().ok());
  EXPECT_EQ(service_->ReaderHandles(writer->ino()).size(), 1u);  // the grace ends it
}

}  // namespace
}  // namespace ckptfs::client
