// Registration against a fake metadata service: registers with the data
// address and uuid, heartbeats with capacity, retries until the service
// appears, registers again after NOT_FOUND, and stops promptly.
#include "server/storage/registration.h"

#include <atomic>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/storage/fake_meta.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

class RegistrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ChunkStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  Registration::Options MakeOptions(const std::string& meta) {
    Registration::Options options;
    options.meta_address = meta;
    options.data_address = "127.0.0.1:7777";
    options.uuid = "0123abcd-0000-4000-8000-000000000001";
    options.heartbeat_interval = absl::Milliseconds(50);
    options.rpc_deadline = absl::Seconds(2);
    options.max_backoff = absl::Milliseconds(100);
    options.on_registered = [this](uint32_t id) {
      registered_id_ = id;
      ++callbacks_;
    };
    return options;
  }

  TempDir dir_;
  std::unique_ptr<ChunkStore> store_;
  std::atomic<uint32_t> registered_id_{0};
  std::atomic<int> callbacks_{0};
};

TEST_F(RegistrationTest, RegistersThenHeartbeatsWithCapacity) {
  auto meta = FakeMeta::Start(0, /*server_id=*/7);
  ASSERT_NE(meta, nullptr);
  auto registration = Registration::Start(MakeOptions(meta->address()), *store_);
  ASSERT_TRUE(WaitFor([&] { return meta->heartbeats() >= 2; }, absl::Seconds(10)));
  EXPECT_EQ(meta->registrations(), 1);
  EXPECT_EQ(meta->last_register().address(), "127.0.0.1:7777");
  EXPECT_EQ(meta->last_register().uuid(), "0123abcd-0000-4000-8000-000000000001");
  EXPECT_GT(meta->last_register().capacity_bytes(), 0u);
  // Absolute and resolved, for clients on this host (client/local_chunk_transport.h).
  EXPECT_EQ(meta->last_register().data_dir(), std::filesystem::canonical(dir_.path()).string());
  EXPECT_EQ(meta->last_heartbeat().server_id(), 7u);
  EXPECT_GT(meta->last_heartbeat().capacity_bytes(), 0u);
  EXPECT_EQ(registration->server_id(), 7u);
  EXPECT_EQ(registered_id_.load(), 7u);
  EXPECT_EQ(callbacks_.load(), 1);
}

TEST_F(RegistrationTest, RetriesUntilTheServiceAppears) {
  ReservedPort reserved;
  const uint16_t port = reserved.port();
  ASSERT_NE(port, 0);
  auto registration = Registration::Start(MakeOptions(absl::StrCat("127.0.0.1:", port)), *store_);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(registration->server_id().has_value());
  reserved.Release();
  auto meta = FakeMeta::Start(port, 3);
  ASSERT_NE(meta, nullptr);
  ASSERT_TRUE(WaitFor([&] { return registration->server_id().has_value(); }, absl::Seconds(15)));
  EXPECT_EQ(registration->server_id(), 3u);
}

TEST_F(RegistrationTest, RegistersAgainWhenForgotten) {
  auto meta = FakeMeta::Start(0);
  ASSERT_NE(meta, nullptr);
  auto registration = Registration::Start(MakeOptions(meta->address()), *store_);
  ASSERT_TRUE(WaitFor([&] { return meta->heartbeats() >= 1; }, absl::Seconds(10)));
  meta->Forget();
  ASSERT_TRUE(WaitFor([&] { return meta->registrations() >= 2; }, absl::Seconds(10)));
  const int beats = meta->heartbeats();
  ASSERT_TRUE(WaitFor([&] { return meta->heartbeats() > beats; }, absl::Seconds(10)));
  EXPECT_EQ(callbacks_.load(), 2);
}

TEST_F(RegistrationTest, StopsPromptlyWhileRetrying) {
  ReservedPort reserved;
  ASSERT_NE(reserved.port(), 0);
  auto registration =
      Registration::Start(MakeOptions(absl::StrCat("127.0.0.1:", reserved.port())), *store_);
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  registration->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_FALSE(registration->server_id().has_value());
}

}  // namespace
}  // namespace ckptfs::storage
