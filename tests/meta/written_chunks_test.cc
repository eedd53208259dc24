// The metadata service's record of a file's written chunks (InodeRecord
// written, common/written_chunks.h) through the Namespace: a new file is
// tracked and empty, CommitWrite adds the chunks it names (cut to the
// size), SetAttr truncation cuts them, O_TRUNC empties them, GetAttr
// returns them when asked, and they survive reopening the store.
#include <vector>

#include "gtest/gtest.h"
#include "server/meta/keys.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

constexpr uint64_t kChunk = 4u << 20;  // the default chunk size

class WrittenChunksTest : public NamespaceFixture {
 protected:
  void SetUp() override {
    NamespaceFixture::SetUp();
    AddServer("uuid-a");
  }

  absl::StatusOr<AttrReply> Commit(uint64_t ino, uint64_t size,
                                   std::vector<std::pair<uint64_t, uint64_t>> written) {
    CommitWriteRequest request;
    request.set_ino(ino);
    request.set_size(size);
    request.set_mtime_ns(1);
    for (const auto& [first, end] : written) {
      ChunkRange* range = request.add_written();
      range->set_first(first);
      range->set_end(end);
    }
    absl::StatusOr<Attr> attr = ns_->CommitWrite(request);
    if (!attr.ok()) return attr.status();
    return Written(ino);
  }

  absl::StatusOr<AttrReply> Written(uint64_t ino) {
    InodeRequest request;
    request.set_ino(ino);
    request.set_with_written(true);
    return ns_->GetAttr(request);
  }

  static std::vector<std::pair<uint64_t, uint64_t>> Ranges(const AttrReply& reply) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (const ChunkRange& range : reply.written().ranges()) {
      out.emplace_back(range.first(), range.end());
    }
    return out;
  }

  absl::Status Truncate(uint64_t ino, uint64_t size) {
    SetAttrRequest request;
    request.set_ino(ino);
    request.set_valid(SET_SIZE);
    request.set_size(size);
    return ns_->SetAttr(request).status();
  }
};

using RangeList = std::vector<std::pair<uint64_t, uint64_t>>;

TEST_F(WrittenChunksTest, ANewFileIsTrackedAndCommitsAddItsChunks) {
  auto file = CreateFile(kRootIno, "f");
  ASSERT_OK(file);
  auto fresh = Written(file->ino());
  ASSERT_OK(fresh);
  EXPECT_TRUE(fresh->written().known());
  EXPECT_TRUE(Ranges(*fresh).empty());
  // A plain GetAttr carries none of it.
  InodeRequest plain;
  plain.set_ino(file->ino());
  auto without = ns_->GetAttr(plain);
  ASSERT_OK(without);
  EXPECT_FALSE(without->has_written());

  auto one = Commit(file->ino(), 2 * kChunk, {{0, 2}});
  ASSERT_OK(one);
  EXPECT_EQ(Ranges(*one), (RangeList{{0, 2}}));
  // A gap (a write 3 chunks further), then the chunk past it.
  auto two = Commit(file->ino(), 5 * kChunk + 7, {{5, 6}});
  ASSERT_OK(two);
  EXPECT_EQ(Ranges(*two), (RangeList{{0, 2}, {5, 6}}));
  auto three = Commit(file->ino(), 5 * kChunk + 7, {{2, 3}, {4, 5}});
  ASSERT_OK(three);
  EXPECT_EQ(Ranges(*three), (RangeList{{0, 3}, {4, 6}}));
  // An index past the file's size after the commit is dropped (a stale one).
  auto past = Commit(file->ino(), 6 * kChunk, {{6, 9}});
  ASSERT_OK(past);
  EXPECT_EQ(Ranges(*past), (RangeList{{0, 3}, {4, 6}}));

  Reopen();
  auto reopened = Written(file->ino());
  ASSERT_OK(reopened);
  EXPECT_TRUE(reopened->written().known());
  EXPECT_EQ(Ranges(*reopened), (RangeList{{0, 3}, {4, 6}}));
}

TEST_F(WrittenChunksTest, TruncationCutsTheRangesAndExtensionAddsNone) {
  auto file = CreateFile(kRootIno, "f");
  ASSERT_OK(file);
  ASSERT_OK(Commit(file->ino(), 8 * kChunk, {{0, 8}}));
  ASSERT_OK(Truncate(file->ino(), 3 * kChunk + 100));  // chunk 3 keeps 100 bytes
  auto cut = Written(file->ino());
  ASSERT_OK(cut);
  EXPECT_EQ(Ranges(*cut), (RangeList{{0, 4}}));
  ASSERT_OK(Truncate(file->ino(), 20 * kChunk));
  auto extended = Written(file->ino());
  ASSERT_OK(extended);
  EXPECT_EQ(Ranges(*extended), (RangeList{{0, 4}}));
  ASSERT_OK(Truncate(file->ino(), 0));
  auto emptied = Written(file->ino());
  ASSERT_OK(emptied);
  EXPECT_TRUE(emptied->written().known());
  EXPECT_TRUE(Ranges(*emptied).empty());
}

TEST_F(WrittenChunksTest, OTruncEmptiesTheRanges) {
  auto file = CreateFile(kRootIno, "f");
  ASSERT_OK(file);
  ASSERT_OK(Commit(file->ino(), 2 * kChunk, {{0, 2}}));
  ASSERT_OK(ns_->Open(file->ino(), /*truncate=*/true));
  auto opened = Written(file->ino());
  ASSERT_OK(opened);
  EXPECT_TRUE(Ranges(*opened).empty());

  ASSERT_OK(Commit(file->ino(), 2 * kChunk, {{0, 2}}));
  CreateRequest again;
  again.set_parent(kRootIno);
  again.set_name("f");
  again.set_mode(0644);
  again.set_truncate(true);
  ASSERT_OK(ns_->Create(again));
  auto created = Written(file->ino());
  ASSERT_OK(created);
  EXPECT_TRUE(created->written().known());
  EXPECT_TRUE(Ranges(*created).empty());
}

TEST_F(WrittenChunksTest, AWriterThatLostCountMakesTheFileUntracked) {
  auto file = CreateFile(kRootIno, "f");
  ASSERT_OK(file);
  CommitWriteRequest request;
  request.set_ino(file->ino());
  request.set_size(kChunk);
  request.set_mtime_ns(1);
  request.set_written_untracked(true);
  ASSERT_OK(ns_->CommitWrite(request));
  auto untracked = Written(file->ino());
  ASSERT_OK(untracked);
  EXPECT_FALSE(untracked->written().known());
  auto later = Commit(file->ino(), kChunk, {{0, 1}});
  ASSERT_OK(later);
  EXPECT_FALSE(later->written().known());
  EXPECT_TRUE(Ranges(*later).empty());
}

}  // namespace
}  // namespace ckptfs::meta
