// Tests of DirHandle paging (fuse/dir_handle.h) against a fake ReadDir.
#include "fuse/dir_handle.h"

#include <sys/stat.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace ckptfs::fuse {
namespace {

// A sorted directory of `n` regular files served `page` entries at a time,
// counting the pages asked for.
class FakeDirectory {
 public:
  FakeDirectory(int n, int page) : page_(page) {
    for (int i = 0; i < n; ++i) names_.push_back(absl::StrFormat("file%05d", i));
  }

  DirHandle::Fetcher Fetcher() {
    return [this](absl::string_view start_after) -> absl::StatusOr<meta::ReadDirReply> {
      ++fetches_;
      if (fail_) return absl::UnavailableError("service down");
      meta::ReadDirReply reply;
      size_t i = 0;
      while (i < names_.size() && names_[i] <= start_after && !start_after.empty()) ++i;
      for (int taken = 0; i < names_.size() && taken < page_; ++i, ++taken) {
        meta::DirEntry* e = reply.add_entries();
        e->set_name(names_[i]);
        e->set_ino(100 + i);
        e->set_type(meta::REGULAR);
      }
      reply.set_more(i < names_.size());
      return reply;
    };
  }

  std::vector<std::string> names_;
  std::atomic<int> fetches_{0};
  bool fail_ = false;

 private:
  const int page_;
};

TEST(DirHandleTest, DotEntriesComeFirst) {
  FakeDirectory dir(0, 10);
  DirHandle handle(5, 1, dir.Fetcher());
  auto dot = handle.At(0);
  ASSERT_TRUE(dot.ok());
  EXPECT_EQ((*dot)->name, ".");
  EXPECT_EQ((*dot)->ino, 5u);
  EXPECT_EQ((*dot)->type, static_cast<mode_t>(S_IFDIR));
  auto dotdot = handle.At(1);
  ASSERT_TRUE(dotdot.ok());
  EXPECT_EQ((*dotdot)->name, "..");
  EXPECT_EQ((*dotdot)->ino, 1u);
  auto end = handle.At(2);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, nullptr);
}

TEST(DirHandleTest, ListsTenThousandEntriesCompletelyAndLazily) {
  FakeDirectory dir(10000, 1024);
  DirHandle handle(5, 1, dir.Fetcher());
  EXPECT_EQ(dir.fetches_, 0);  // nothing fetched before the first readdir
  auto first = handle.At(2);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)->name, "file00000");
  EXPECT_EQ(dir.fetches_, 1);

  std::vector<std::string> listed;
  for (uint64_t off = 2;; ++off) {
    auto e = handle.At(off);
    ASSERT_TRUE(e.ok());
    if (*e == nullptr) break;
    listed.push_back((*e)->name);
    EXPECT_EQ((*e)->type, static_cast<mode_t>(S_IFREG));
  }
  EXPECT_EQ(listed, dir.names_);
  EXPECT_EQ(dir.fetches_, 10);  // ceil(10000 / 1024) pages, no refetch
}

TEST(DirHandleTest, OffsetsStayStableAfterTheDirectoryChanges) {
  FakeDirectory dir(50, 8);
  DirHandle handle(5, 1, dir.Fetcher());
  auto at20 = handle.At(20);
  ASSERT_TRUE(at20.ok());
  const std::string name20 = (*at20)->name;
  dir.names_.insert(dir.names_.begin(), "aaa-new-first");  // sorts before all
  auto again = handle.At(20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->name, name20);
  EXPECT_EQ(*again, *at20);  // same entry object: pointers stay valid
}

TEST(DirHandleTest, ErrorsComeBackAndPagingResumes) {
  FakeDirectory dir(20, 8);
  DirHandle handle(5, 1, dir.Fetcher());
  dir.fail_ = true;
  auto failed = handle.At(2);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  dir.fail_ = false;
  int count = 0;
  for (uint64_t off = 2;; ++off) {
    auto e = handle.At(off);
    ASSERT_TRUE(e.ok());
    if (*e == nullptr) break;
    ++count;
  }
  EXPECT_EQ(count, 20);
}

TEST(DirHandleTest, EmptyPageClaimingMoreEnds) {
  int calls = 0;
  DirHandle handle(5, 1, [&calls](absl::string_view) -> absl::StatusOr<meta::ReadDirReply> {
    ++calls;
    meta::ReadDirReply reply;
    reply.set_more(true);
    return reply;
  });
  auto e = handle.At(2);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, nullptr);
  EXPECT_EQ(calls, 1);
}

TEST(DirHandleTest, ConcurrentReadersSeeOneConsistentListing) {
  FakeDirectory dir(3000, 100);
  DirHandle handle(5, 1, dir.Fetcher());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (uint64_t off = 2; off < 3002; ++off) {
        auto e = handle.At(off);
        if (!e.ok() || *e == nullptr || (*e)->name != dir.names_[off - 2]) ++mismatches;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, 0);
  auto end = handle.At(3002);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, nullptr);
}

}  // namespace
}  // namespace ckptfs::fuse
