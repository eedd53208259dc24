// A Client over the real metadata service in-process and the in-memory
// chunk transport (client/testing/), with the service, the recording
// wrapper of the client's MetaClient and the transport kept reachable for
// inspection and fault injection, and small helpers shared by the client
// tests. Thread-safety: as the Client's.
#ifndef CKPTFS_TESTS_CLIENT_CLIENT_FIXTURE_H_
#define CKPTFS_TESTS_CLIENT_CLIENT_FIXTURE_H_

#include <fcntl.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "client/client.h"
#include "client/testing/fake_chunk_transport.h"
#include "client/testing/in_process_meta.h"
#include "client/testing/recording_meta_client.h"
#include "gtest/gtest.h"

namespace ckptfs::client {

inline constexpr uint32_t kTestChunk = 64 * 1024;

class ClientFixture : public ::testing::Test {
 protected:
  void SetUp() override { MakeClient(DefaultOptions()); }

  static ClientOptions DefaultOptions() {
    ClientOptions options;
    options.io_threads = 8;
    options.max_inflight_chunks_per_file = 4;
    options.readahead_chunks = 3;
    return options;
  }

  // Replaces the client (and the service and transport) with one made with
  // `options`: a fresh service with storage servers 1, 2 and 3, and files of
  // kTestChunk chunks.
  void MakeClient(const ClientOptions& options) {
    client_.reset();
    service_.reset();
    testing::InProcessMetaService::Options service_options;
    service_options.storage_servers = 3;
    service_options.default_chunk_size = kTestChunk;
    auto service = testing::InProcessMetaService::Start(service_options);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
    auto meta = std::make_unique<testing::RecordingMetaClient>(service_->NewClient());
    auto transport = std::make_unique<testing::FakeChunkTransport>();
    meta_ = meta.get();
    transport_ = transport.get();
    client_ = Client::CreateWithServices(options, std::move(meta), std::move(transport));
  }

  // Creates (or opens) `name` in the root with `flags` and returns the file.
  std::unique_ptr<File> CreateFile(const std::string& name, int flags = O_RDWR | O_CREAT) {
    auto created = client_->Create(kRootIno, name, 0644, 0, 0, flags);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return nullptr;
    return std::move(created->file);
  }

  // Reads the whole file through a fresh handle (close-to-open reader).
  std::string ReadAll(uint64_t ino) {
    auto file = client_->Open(ino, O_RDONLY);
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return "";
    std::string out((*file)->size(), '\0');
    size_t done = 0;
    while (done < out.size()) {
      auto n = (*file)->Read(done, out.data() + done, std::min<size_t>(out.size() - done, 77777));
      EXPECT_TRUE(n.ok()) << n.status();
      if (!n.ok() || *n == 0) break;
      done += *n;
    }
    out.resize(done);
    EXPECT_TRUE((*file)->Close().ok());
    return out;
  }

  // Equal strings, or a message naming the first differing byte (binary
  // data is not printed).
  static ::testing::AssertionResult SameBytes(const std::string& got, const std::string& want) {
    if (got == want) return ::testing::AssertionSuccess();
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
    return ::testing::AssertionFailure() << "got " << got.size() << " bytes, want " << want.size()
                                         << "; first difference at byte " << i;
  }

  static std::string RandomBytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  }

  std::unique_ptr<testing::InProcessMetaService> service_;  // outlives client_
  std::unique_ptr<Client> client_;
  testing::RecordingMetaClient* meta_ = nullptr;      // owned by client_
  testing::FakeChunkTransport* transport_ = nullptr;  // owned by client_
};

}  // namespace ckptfs::client

#endif  // CKPTFS_TESTS_CLIENT_CLIENT_FIXTURE_H_
