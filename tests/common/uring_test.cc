// Ring: batches of reads, writes and fdatasyncs on real files, per-op
// results and errors.
#include "common/uring.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "gtest/gtest.h"

namespace ckptfs {
namespace {

class RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/ckptfs-uring-test.XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/file";
    fd_.Reset(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd_.valid());
    auto ring = Ring::Create(4);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
  }
  void TearDown() override {
    fd_.Reset();
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_, path_;
  UniqueFd fd_;
  std::unique_ptr<Ring> ring_;
};

TEST_F(RingTest, WriteThenReadBack) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
  ASSERT_TRUE(ring_->PwriteAll(fd_.get(), data.data(), data.size(), 0).ok());
  ASSERT_TRUE(ring_->Fdatasync(fd_.get()).ok());
  std::string back(data.size(), '\0');
  auto n = ring_->Pread(fd_.get(), back.data(), back.size(), 0);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, data.size());
  EXPECT_TRUE(back == data);
}

TEST_F(RingTest, ReadStopsAtEndOfFile) {
  ASSERT_TRUE(ring_->PwriteAll(fd_.get(), "hello", 5, 0).ok());
  char buf[64];
  auto n = ring_->Pread(fd_.get(), buf, sizeof(buf), 2);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3u);
  EXPECT_EQ(std::string(buf, 3), "llo");
}

TEST_F(RingTest, BatchLargerThanTheRingRunsEveryOp) {
  // 10 ops through a 4-entry ring, then one batch reading them back.
  std::vector<std::string> pieces;
  std::vector<Ring::Op> writes;
  for (int i = 0; i < 10; ++i) pieces.push_back(std::string(1000, static_cast<char>('a' + i)));
  for (int i = 0; i < 10; ++i) {
    writes.push_back({Ring::OpKind::kWrite, fd_.get(), pieces[i].data(), pieces[i].size(),
                      static_cast<off_t>(i * 1000), 0});
  }
  writes.push_back({Ring::OpKind::kFdatasync, fd_.get(), nullptr, 0, 0, 0});
  ASSERT_TRUE(ring_->Run(writes).ok());
  for (const Ring::Op& op : writes) EXPECT_GE(op.result, 0);
  std::vector<std::string> back(10, std::string(1000, '\0'));
  std::vector<Ring::Op> reads;
  for (int i = 0; i < 10; ++i) {
    reads.push_back({Ring::OpKind::kRead, fd_.get(), back[i].data(), back[i].size(),
                     static_cast<off_t>(i * 1000), 0});
  }
  ASSERT_TRUE(ring_->Run(reads).ok());
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(reads[i].result, 1000);
    EXPECT_EQ(back[i], pieces[i]);
  }
}

TEST_F(RingTest, EachOpCarriesItsOwnError) {
  char buf[16] = {};
  std::vector<Ring::Op> ops = {
      {Ring::OpKind::kWrite, fd_.get(), buf, sizeof(buf), 0, 0},
      {Ring::OpKind::kRead, 12345, buf, sizeof(buf), 0, 0},  // not an open fd
  };
  ASSERT_TRUE(ring_->Run(ops).ok());
  EXPECT_EQ(ops[0].result, 16);
  EXPECT_EQ(ops[1].result, -EBADF);
  auto n = ring_->Pread(12345, buf, sizeof(buf), 0);
  EXPECT_FALSE(n.ok());
}

TEST_F(RingTest, EmptyBatchIsOk) {
  std::vector<Ring::Op> none;
  EXPECT_TRUE(ring_->Run(none).ok());
}

}  // namespace
}  // namespace ckptfs
