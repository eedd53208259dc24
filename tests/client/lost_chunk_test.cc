// A chunk that was written and then vanished from every storage server (a
// replaced disk, a quarantined only copy, a power loss) reads as EIO naming
// the inode and chunk, never as zeros; chunks never written (the holes of a
// sparse file, a truncate up) still read as zeros. Over the metadata service
// in-process, which keeps the written chunk ranges, and the fake transport.
#include <cerrno>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

class LostChunkTest : public ClientFixture {
 protected:
  // Removes chunk `index` of `ino` from every fake storage server.
  void LoseChunk(uint64_t ino, uint64_t index) {
    bool any = false;
    for (uint32_t server : {1u, 2u, 3u}) any = transport_->DeleteChunk(server, ino, index) || any;
    ASSERT_TRUE(any) << "chunk " << index << " of inode " << ino << " was on no server";
  }

  // Reads [offset, offset + len) through a fresh handle.
  absl::StatusOr<std::string> ReadRange(uint64_t ino, uint64_t offset, size_t len) {
    auto file = client_->Open(ino, O_RDONLY);
    if (!file.ok()) return file.status();
    std::string out(len, '\0');
    absl::StatusOr<size_t> n = (*file)->Read(offset, out.data(), len);
    (void)(*file)->Close();
    if (!n.ok()) return n.status();
    out.resize(*n);
    return out;
  }

  absl::Status Truncate(uint64_t ino, uint64_t size) {
    meta::SetAttrRequest request;
    request.set_ino(ino);
    request.set_valid(meta::SET_SIZE);
    request.set_size(size);
    return client_->SetAttr(request).status();
  }
};

TEST_F(LostChunkTest, AWrittenChunkMissingFromEveryServerReadsEio) {
  const std::string data = RandomBytes(4 * kTestChunk, 1);
  std::unique_ptr<File> file = CreateFile("f");
  ASSERT_NE(file, nullptr);
  const uint64_t ino = file->ino();
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  ASSERT_NO_FATAL_FAILURE(LoseChunk(ino, 2));

  absl::StatusOr<std::string> before = ReadRange(ino, 0, 2 * kTestChunk);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(SameBytes(*before, data.substr(0, 2 * kTestChunk)));
  absl::StatusOr<std::string> lost = ReadRange(ino, 2 * kTestChunk + 10, 100);
  ASSERT_FALSE(lost.ok()) << "a lost chunk read as " << lost->size() << " bytes of zeros";
  EXPECT_EQ(ErrnoFromStatus(lost.status()), EIO) << lost.status();
  EXPECT_TRUE(absl::StrContains(lost.status().message(), absl::StrCat("chunk 2 of inode ", ino)))
      << lost.status();
  EXPECT_TRUE(absl::StrContains(lost.status().message(), "restore")) << lost.status();
  absl::StatusOr<std::string> after = ReadRange(ino, 3 * kTestChunk, kTestChunk);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(SameBytes(*after, data.substr(3 * kTestChunk)));
}

TEST_F(LostChunkTest, HolesOfASparseFileReadZerosAndItsWrittenChunksStayTracked) {
  const std::string head = RandomBytes(1000, 2);
  const std::string tail = RandomBytes(1000, 3);
  std::unique_ptr<File> file = CreateFile("sparse");
  ASSERT_NE(file, nullptr);
  const uint64_t ino = file->ino();
  ASSERT_TRUE(file->Write(0, head.data(), head.size()).ok());
  ASSERT_TRUE(file->Write(3 * kTestChunk + 5, tail.data(), tail.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  ASSERT_TRUE(Truncate(ino, 6 * kTestChunk).ok());  // and an extension

  std::string want(6 * kTestChunk, '\0');
  want.replace(0, head.size(), head);
  want.replace(3 * kTestChunk + 5, tail.size(), tail);
  EXPECT_TRUE(SameBytes(ReadAll(ino), want));

  ASSERT_NO_FATAL_FAILURE(LoseChunk(ino, 3));
  absl::StatusOr<std::string> lost = ReadRange(ino, 3 * kTestChunk, 100);
  ASSERT_FALSE(lost.ok()) << "a lost chunk read as zeros";
  EXPECT_EQ(ErrnoFromStatus(lost.status()), EIO) << lost.status();
  // The holes around it are still holes.
  absl::StatusOr<std::string> hole = ReadRange(ino, kTestChunk, 2 * kTestChunk);
  ASSERT_TRUE(hole.ok()) << hole.status();
  EXPECT_EQ(*hole, std::string(2 * kTestChunk, '\0'));
}

TEST_F(LostChunkTest, TruncateKeepsTheCutChunkWrittenAndMakesTheRestHoles) {
  const std::string data = RandomBytes(4 * kTestChunk, 4);
  std::unique_ptr<File> file = CreateFile("cut");
  ASSERT_NE(file, nullptr);
  const uint64_t ino = file->ino();
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Close().ok());
  ASSERT_TRUE(Truncate(ino, kTestChunk + kTestChunk / 2).ok());
  ASSERT_TRUE(Truncate(ino, 4 * kTestChunk).ok());

  std::string want = data.substr(0, kTestChunk + kTestChunk / 2);
  want.resize(4 * kTestChunk, '\0');
  EXPECT_TRUE(SameBytes(ReadAll(ino), want));

  ASSERT_NO_FATAL_FAILURE(LoseChunk(ino, 1));
  absl::StatusOr<std::string> lost = ReadRange(ino, kTestChunk, 100);
  ASSERT_FALSE(lost.ok()) << "the chunk cut by the truncate read as zeros when lost";
  EXPECT_EQ(ErrnoFromStatus(lost.status()), EIO) << lost.status();
}

TEST_F(LostChunkTest, AChunkLostBeforeItsSizeIsCommittedReadsEio) {
  const std::string data = RandomBytes(2 * kTestChunk, 5);
  std::unique_ptr<File> file = CreateFile("uncommitted");
  ASSERT_NE(file, nullptr);
  const uint64_t ino = file->ino();
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  // The chunks reach the servers; the size commit does not reach the
  // service, so only this handle knows chunk 1 was written.
  meta_->FailNext("CommitWrite", absl::UnavailableError("service unreachable"));
  ASSERT_FALSE(file->Flush().ok());
  ASSERT_NO_FATAL_FAILURE(LoseChunk(ino, 1));

  std::string out(100, '\0');
  absl::StatusOr<size_t> n = file->Read(kTestChunk, out.data(), out.size());
  ASSERT_FALSE(n.ok()) << "a lost chunk read as " << *n << " bytes of zeros";
  EXPECT_EQ(ErrnoFromStatus(n.status()), EIO) << n.status();
  (void)file->Close();
}

}  // namespace
}  // namespace ckptfs::client
