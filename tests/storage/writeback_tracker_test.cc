// WritebackTracker: a failed sync marks what was not yet durable lost
// (chunks published, and chunks being written, at the time), every later
// check of them fails until they are published again or removed, a
// success covers only what was published before it began, an adopted file
// written before a failure counts as lost, errors no write-back gives change
// nothing, and past its entry limit one failure makes the whole store lost.
#include "server/storage/writeback_tracker.h"

#include <cerrno>

#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs::storage {
namespace {

const absl::Status kWritebackError = ErrnoStatus(EIO, "syncfs /data: Input/output error");

void Publish(WritebackTracker& tracker, ChunkKey key) { tracker.Published(key, tracker.Writing()); }

TEST(WritebackTrackerTest, AFailureLosesWhatWasNotDurableUntilItIsWrittenAgain) {
  WritebackTracker tracker;
  Publish(tracker, {1, 0});
  Publish(tracker, {2, 0});
  tracker.Synced(2, tracker.BeginSync());        // inode 2 is durable
  const uint64_t in_flight = tracker.Writing();  // inode 3 being written
  tracker.Failed(kWritebackError);
  tracker.Published({3, 0}, in_flight);
  Publish(tracker, {4, 0});  // after the failure: its pages are new
  absl::Status one = tracker.CheckNoneLost(1);
  EXPECT_EQ(ErrnoFromStatus(one), EIO);
  EXPECT_NE(one.message().find("chunk 0 of inode 1"), absl::string_view::npos) << one;
  EXPECT_NE(one.message().find("syncfs /data"), absl::string_view::npos) << one;
  EXPECT_TRUE(tracker.CheckNoneLost(2).ok());
  EXPECT_EQ(ErrnoFromStatus(tracker.CheckNoneLost(3)), EIO);
  EXPECT_TRUE(tracker.CheckNoneLost(4).ok());
  // A later success does not make the lost ones durable.
  tracker.Synced(std::nullopt, tracker.BeginSync());
  EXPECT_EQ(ErrnoFromStatus(tracker.CheckNoneLost(std::nullopt)), EIO);
  Publish(tracker, {1, 0});
  tracker.Removed({3, 0});
  EXPECT_TRUE(tracker.CheckNoneLost(std::nullopt).ok());
}

TEST(WritebackTrackerTest, ASyncCoversOnlyWhatWasPublishedBeforeItBegan) {
  WritebackTracker tracker;
  Publish(tracker, {1, 0});
  const uint64_t begun = tracker.BeginSync();
  Publish(tracker, {1, 1});  // while the sync runs
  tracker.Synced(1, begun);
  tracker.Failed(kWritebackError);
  EXPECT_EQ(ErrnoFromStatus(tracker.CheckNoneLost(1)), EIO);  // chunk 1 was not covered
  tracker.Removed({1, 1});
  EXPECT_TRUE(tracker.CheckNoneLost(1).ok());
}

TEST(WritebackTrackerTest, AnAdoptedFileWrittenBeforeAFailureIsLost) {
  WritebackTracker tracker;
  const absl::Time written = absl::Now() - absl::Seconds(1);
  tracker.Failed(kWritebackError);
  tracker.Published({1, 0}, tracker.Writing(), written);
  EXPECT_EQ(ErrnoFromStatus(tracker.CheckNoneLost(1)), EIO);
  tracker.Published({2, 0}, tracker.Writing(), absl::Now() + absl::Seconds(1));
  EXPECT_TRUE(tracker.CheckNoneLost(2).ok());
}

TEST(WritebackTrackerTest, ErrorsNoWritebackGivesChangeNothing) {
  WritebackTracker tracker;
  Publish(tracker, {1, 0});
  tracker.Failed(ErrnoStatus(ENOTDIR, "opendir /data/chunks/1"));
  tracker.Failed(ErrnoStatus(EMFILE, "open /data/chunks/1/0 to sync"));
  EXPECT_TRUE(tracker.CheckNoneLost(std::nullopt).ok());
}

TEST(WritebackTrackerTest, PastItsLimitOneFailureLosesEverything) {
  WritebackTracker tracker(/*max_tracked=*/2);
  Publish(tracker, {1, 0});
  Publish(tracker, {1, 1});
  Publish(tracker, {1, 2});  // untracked
  // A whole-store sync that covers the untracked chunk ends the overflow.
  tracker.Synced(std::nullopt, tracker.BeginSync());
  Publish(tracker, {2, 0});
  tracker.Failed(kWritebackError);
  EXPECT_EQ(ErrnoFromStatus(tracker.CheckNoneLost(2)), EIO);
  EXPECT_TRUE(tracker.CheckNoneLost(5).ok()) << "the overflow had ended: only inode 2 is lost";
  Publish(tracker, {2, 0});
  EXPECT_TRUE(tracker.CheckNoneLost(std::nullopt).ok());

  WritebackTracker full(/*max_tracked=*/1);
  Publish(full, {1, 0});
  Publish(full, {1, 1});  // untracked
  full.Failed(kWritebackError);
  absl::Status any = full.CheckNoneLost(7);
  EXPECT_EQ(ErrnoFromStatus(any), EIO) << "an inode it never saw may have lost bytes too";
  EXPECT_NE(any.message().find("restarts"), absl::string_view::npos) << any;
}

}  // namespace
}  // namespace ckptfs::storage
