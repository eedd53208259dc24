// OrphanReclaimer tests against a fake storage server that records the
// frames it receives: an unlinked file's chunks are trimmed only after the
// grace period, on every stripe server, and the orphan is forgotten only
// when every trim succeeded; a down or failing server means "retry later".

#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "server/meta/keys.h"
#include "server/meta/orphan_reclaimer.h"
#include "tests/meta/fake_storage_server.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

// An address on which nothing listens.
std::string ClosedAddress() {
  auto fd = ListenTcp(HostPort{"127.0.0.1", 0});
  const uint16_t port = *LocalPort(fd->get());
  return absl::StrCat("127.0.0.1:", port);  // closed when fd goes
}

class OrphanReclaimerTest : public NamespaceFixture {
 protected:
  void SetUp() override {
    options_.orphan_grace = absl::Seconds(60);
    NamespaceFixture::SetUp();
    OrphanReclaimer::Options options;
    options.interval = absl::Milliseconds(20);
    options.io_timeout = absl::Seconds(2);
    reclaimer_ = std::make_unique<OrphanReclaimer>(ns_.get(), membership_.get(), options);
  }
  void TearDown() override { reclaimer_.reset(); }

  // Creates, writes and unlinks a file; returns its inode.
  uint64_t MakeOrphan(const std::string& name) {
    auto file = CreateFile(kRootIno, name);
    EXPECT_TRUE(file.ok()) << file.status();
    EXPECT_OK(ns_->CommitWrite(file->ino(), 10 << 20, 0));
    EXPECT_OK(ns_->Unlink(kRootIno, name));
    return file.ok() ? file->ino() : 0;
  }

  size_t RunOnce() {
    auto reclaimed = reclaimer_->RunOnce();
    EXPECT_TRUE(reclaimed.ok()) << reclaimed.status();
    return reclaimed.ok() ? *reclaimed : 0;
  }

  std::unique_ptr<OrphanReclaimer> reclaimer_;
};

TEST_F(OrphanReclaimerTest, TrimsEveryStripeServerAfterTheGracePeriod) {
  FakeStorageServer s1, s2;
  const uint32_t id1 = AddServer("uuid-1", 1000, 0, s1.address());
  const uint32_t id2 = AddServer("uuid-2", 1000, 0, s2.address());
  const uint64_t ino = MakeOrphan("old");

  EXPECT_EQ(RunOnce(), 0u);  // still in its grace period
  EXPECT_TRUE(s1.requests().empty());
  EXPECT_TRUE(ns_->GetAttr(ino).ok());

  clock_.Advance(absl::Seconds(61));
  // Keep both servers alive on the manual clock (the reclaimer does not care).
  AddServer("uuid-1", 1000, 0, s1.address());
  AddServer("uuid-2", 1000, 0, s2.address());
  EXPECT_EQ(RunOnce(), 1u);
  for (FakeStorageServer* server : {&s1, &s2}) {
    auto requests = server->requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].op(), data::TRIM);
    EXPECT_EQ(requests[0].ino(), ino);
    EXPECT_EQ(requests[0].trim_size(), 0u);
    EXPECT_EQ(requests[0].chunk_size(), 4u << 20);
  }
  EXPECT_ERRNO(ns_->GetAttr(ino), ENOENT);
  EXPECT_TRUE(ns_->DueOrphans(0, 10)->empty());
  EXPECT_EQ(RunOnce(), 0u);  // nothing left
  (void)id1;
  (void)id2;
}

TEST_F(OrphanReclaimerTest, ADownServerMeansRetryLater) {
  AddServer("uuid-1", 1000, 0, ClosedAddress());
  const uint64_t ino = MakeOrphan("old");
  clock_.Advance(absl::Seconds(61));
  EXPECT_EQ(RunOnce(), 0u);
  EXPECT_TRUE(ns_->GetAttr(ino).ok());
  ASSERT_EQ(ns_->DueOrphans(0, 10)->size(), 1u);

  // The server comes back (same uuid, new address): the next pass reclaims.
  FakeStorageServer server;
  AddServer("uuid-1", 1000, 0, server.address());
  EXPECT_EQ(RunOnce(), 1u);
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_ERRNO(ns_->GetAttr(ino), ENOENT);
}

TEST_F(OrphanReclaimerTest, AFailedTrimKeepsTheOrphan) {
  FakeStorageServer server;
  server.set_error(EIO);
  AddServer("uuid-1", 1000, 0, server.address());
  const uint64_t ino = MakeOrphan("old");
  clock_.Advance(absl::Seconds(61));
  EXPECT_EQ(RunOnce(), 0u);
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_TRUE(ns_->GetAttr(ino).ok());
  server.set_error(ENOENT);  // nothing stored there: as good as trimmed
  EXPECT_EQ(RunOnce(), 1u);
  EXPECT_ERRNO(ns_->GetAttr(ino), ENOENT);
}

TEST_F(OrphanReclaimerTest, TheBackgroundThreadReclaims) {
  FakeStorageServer server;
  AddServer("uuid-1", 1000, 0, server.address());
  const uint64_t a = MakeOrphan("a");
  const uint64_t b = MakeOrphan("b");
  clock_.Advance(absl::Seconds(61));
  reclaimer_->Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline && !ns_->DueOrphans(0, 10)->empty()) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  reclaimer_->Stop();
  EXPECT_ERRNO(ns_->GetAttr(a), ENOENT);
  EXPECT_ERRNO(ns_->GetAttr(b), ENOENT);
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST_F(OrphanReclaimerTest, WakeStartsAPassAtOnce) {
  // An aborted checkpoint's files are due at once; the coordinator wakes the
  // reclaimer rather than leaving them for the end of a long interval.
  FakeStorageServer server;
  AddServer("uuid-1", 1000, 0, server.address());
  OrphanReclaimer::Options options;
  options.interval = absl::Hours(1);
  OrphanReclaimer slow(ns_.get(), membership_.get(), options);
  slow.Start();
  const uint64_t ino = MakeOrphan("a");
  clock_.Advance(absl::Seconds(61));
  slow.Wake();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline && ns_->GetAttr(ino).ok()) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  slow.Stop();
  EXPECT_ERRNO(ns_->GetAttr(ino), ENOENT);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(OrphanReclaimerTest, OrphansOnADownServerDoNotStarveTheOthers) {
  // Three orphans striped only over a dead server, then one over a live one,
  // with pages of two: one pass must still reach the fourth.
  AddServer("uuid-dead", 1000, 0, ClosedAddress());
  std::vector<uint64_t> blocked;
  for (int i = 0; i < 3; ++i) blocked.push_back(MakeOrphan(absl::StrCat("blocked", i)));
  clock_.Advance(absl::Seconds(11));  // uuid-dead stops being alive
  FakeStorageServer server;
  AddServer("uuid-live", 1000, 0, server.address());
  const uint64_t free_ino = MakeOrphan("free");
  clock_.Advance(absl::Seconds(61));

  OrphanReclaimer::Options options;
  options.batch = 2;
  options.io_timeout = absl::Seconds(2);
  OrphanReclaimer small_pages(ns_.get(), membership_.get(), options);
  auto reclaimed = small_pages.RunOnce();
  ASSERT_TRUE(reclaimed.ok()) << reclaimed.status();
  EXPECT_EQ(*reclaimed, 1u);
  EXPECT_ERRNO(ns_->GetAttr(free_ino), ENOENT);
  for (uint64_t ino : blocked) EXPECT_TRUE(ns_->GetAttr(ino).ok());
  EXPECT_EQ(ns_->DueOrphans(0, 10)->size(), 3u);
}

}  // namespace
}  // namespace ckptfs::meta
