// UnsyncedWrites: what a SYNC must name (each incarnation once per file and
// server), what a successful SYNC clears (never a write recorded after it
// was taken), what the size commit reports, and that a file's record lives
// while something holds it.
#include "client/unsynced_writes.h"

#include <vector>

#include "gtest/gtest.h"

namespace ckptfs::client {
namespace {

std::vector<uint64_t> Named(const UnsyncedWrites::Pending& pending) { return pending.incarnations; }

TEST(UnsyncedWritesTest, ASyncNamesEachIncarnationOnceAndClearsWhatItConfirmed) {
  UnsyncedWrites writes;
  writes.Hold(5);
  writes.Stored(5, 1, 0xA);
  writes.Stored(5, 1, 0xA);
  writes.Stored(5, 1, 0xB);  // the server restarted between two writes
  writes.Stored(5, 2, 0xC);
  writes.Stored(5, 2, 0);  // a server that does not say: nothing to hold it to
  EXPECT_EQ(Named(writes.ForSync(5, 1)), (std::vector<uint64_t>{0xA, 0xB}));
  EXPECT_EQ(Named(writes.ForSync(5, 2)), (std::vector<uint64_t>{0xC}));
  EXPECT_TRUE(Named(writes.ForSync(6, 1)).empty());

  const UnsyncedWrites::Pending pending = writes.ForSync(5, 1);
  writes.Stored(5, 1, 0xB);  // written again while the sync ran
  writes.Synced(5, 1, pending);
  EXPECT_EQ(Named(writes.ForSync(5, 1)), (std::vector<uint64_t>{0xB}));
  writes.Synced(5, 1, writes.ForSync(5, 1));
  EXPECT_TRUE(Named(writes.ForSync(5, 1)).empty());
  ASSERT_EQ(writes.Of(5).size(), 1u);
  EXPECT_EQ(writes.Of(5)[0].server_id(), 2u);
  EXPECT_EQ(writes.Of(5)[0].incarnation(), 0xCu);
}

TEST(UnsyncedWritesTest, AFileIsForgottenWithItsLastHolder) {
  UnsyncedWrites writes;
  writes.Hold(5);
  writes.Hold(5);
  writes.Stored(5, 1, 0xA);
  writes.Release(5);
  EXPECT_EQ(writes.Of(5).size(), 1u);
  writes.Release(5);
  EXPECT_TRUE(writes.Of(5).empty());
  // Unheld (a tool's writes): kept until a sync confirms them.
  writes.Stored(7, 1, 0xA);
  EXPECT_EQ(writes.Of(7).size(), 1u);
  writes.Synced(7, 1, writes.ForSync(7, 1));
  EXPECT_TRUE(writes.Of(7).empty());
}

}  // namespace
}  // namespace ckptfs::client
