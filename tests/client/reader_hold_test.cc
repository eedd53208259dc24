// Reader holds of File handles (client/reader_hold.h) over the in-memory
// fakes: a read-only open asks the service to hold the file, Close releases
// exactly that hold once, handles that may write never ask, and a release
// that fails leaves the close successful.
#include <fcntl.h>

#include <cerrno>
#include <set>

#include "common/errno_status.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

using ReaderHoldTest = ClientFixture;

TEST_F(ReaderHoldTest, EachReadOnlyHandleHoldsTheFileUntilItCloses) {
  auto writer = CreateFile("shard", O_WRONLY | O_CREAT);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_TRUE(meta_->ReaderHandles(writer->ino()).empty());

  auto a = client_->Open(writer->ino(), O_RDONLY);
  auto b = client_->Open(writer->ino(), O_RDONLY);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(meta_->ReaderHandles(writer->ino()).size(), 2u);
  ASSERT_TRUE((*a)->Close().ok());
  EXPECT_EQ(meta_->ReaderHandles(writer->ino()).size(), 1u);
  ASSERT_TRUE((*a)->Close().ok());  // a second Close releases nothing more
  EXPECT_EQ(meta_->Calls("ReleaseReader"), 1);
  b->reset();  // destroying an open handle closes it
  EXPECT_TRUE(meta_->ReaderHandles(writer->ino()).empty());
  EXPECT_EQ(meta_->Calls("ReleaseReader"), 2);
}

TEST_F(ReaderHoldTest, HandlesThatMayWriteHoldNothing) {
  auto file = CreateFile("rw", O_RDWR | O_CREAT);
  ASSERT_NE(file, nullptr);
  auto again = client_->Open(file->ino(), O_RDWR);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(meta_->ReaderHandles(file->ino()).empty());
  ASSERT_TRUE((*again)->Close().ok());
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(meta_->Calls("ReleaseReader"), 0);
}

TEST_F(ReaderHoldTest, AFailedReleaseDoesNotFailTheClose) {
  auto writer = CreateFile("f", O_WRONLY | O_CREAT);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Close().ok());
  auto reader = client_->Open(writer->ino(), O_RDONLY);
  ASSERT_TRUE(reader.ok());
  meta_->FailNext("ReleaseReader", ErrnoStatus(EIO, "injected"));
  EXPECT_TRUE((*reader)->Close().ok());
  EXPECT_EQ(meta_->ReaderHandles(writer->ino()).size(), 1u);  // the grace ends it
}

}  // namespace
}  // namespace ckptfs::client
