// MountTest: a real kernel mount of ckptfs served in this process by a
// Filesystem over a Client of client/testing: the metadata service
// in-process (storage servers 1 and 2, 64 KiB chunks), its MetaClient
// wrapped to count and fail calls, and the in-memory chunk transport (no
// daemons), for the tests of the FUSE operations (mount_test.cc,
// checkpoint_mount_test.cc).
//
// Needs root and /dev/fuse; SetUp skips the test otherwise. TearDown
// unmounts (lazily if need be) and joins the session thread even when a
// test fails; the service goes last. Thread-safety: test-thread only,
// except the service, the wrapper and the transport.
#ifndef CKPTFS_TESTS_FUSE_MOUNT_FIXTURE_H_
#define CKPTFS_TESTS_FUSE_MOUNT_FIXTURE_H_

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "client/client.h"
#include "client/testing/fake_chunk_transport.h"
#include "client/testing/in_process_meta.h"
#include "client/testing/recording_meta_client.h"
#include "fuse/filesystem.h"
#include "fuse/mount.h"
#include "gtest/gtest.h"

namespace ckptfs::fuse {

using client::testing::FakeChunkTransport;
using client::testing::InProcessMetaService;
using client::testing::RecordingMetaClient;

class MountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
      GTEST_SKIP() << "needs root and /dev/fuse";
    }
    char tmpl[] = "/tmp/ckptfs-fuse-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    InProcessMetaService::Options service_options;
    service_options.storage_servers = 2;
    service_options.default_chunk_size = 64 * 1024;
    auto service = InProcessMetaService::Start(service_options);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
    auto meta = std::make_unique<RecordingMetaClient>(service_->NewClient());
    auto transport = std::make_unique<FakeChunkTransport>();
    meta_ = meta.get();
    transport_ = transport.get();
    client::ClientOptions options;
    options.io_threads = 4;
    fs_ = new Filesystem(
        client::Client::CreateWithServices(options, std::move(meta), std::move(transport)),
        FilesystemOptions{});
    MountOptions mount_options;
    mount_options.mountpoint = dir_;
    mount_options.threads = 4;
    mount_options.read_ahead_kb = 0;
    auto mount = Mount::Create(std::unique_ptr<Filesystem>(fs_), mount_options);
    ASSERT_TRUE(mount.ok()) << mount.status();
    mount_ = *std::move(mount);
    loop_ = std::thread([this] { loop_status_ = mount_->Run(); });
  }

  void TearDown() override {
    if (mount_ != nullptr) {
      if (umount2(dir_.c_str(), 0) != 0) umount2(dir_.c_str(), MNT_DETACH);
      loop_.join();
      EXPECT_TRUE(loop_status_.ok()) << loop_status_;
      mount_.reset();
    }
    if (!dir_.empty()) rmdir(dir_.c_str());
  }

  std::string P(const std::string& name) const { return dir_ + "/" + name; }

  // Writes `data` to a new file; returns close(2)'s errno (0 on success).
  int WriteFile(const std::string& name, const std::string& data) {
    int fd = open(P(name).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return errno;
    if (write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
      int err = errno;
      close(fd);
      return err;
    }
    return close(fd) == 0 ? 0 : errno;
  }

  std::string ReadFile(const std::string& name) {
    std::string out;
    int fd = open(P(name).c_str(), O_RDONLY);
    if (fd < 0) return "<open failed>";
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
    close(fd);
    return out;
  }

  std::string dir_;
  std::unique_ptr<InProcessMetaService> service_;  // outlives the mount
  RecordingMetaClient* meta_ = nullptr;            // owned by fs_
  FakeChunkTransport* transport_ = nullptr;
  Filesystem* fs_ = nullptr;  // owned by mount_
  std::unique_ptr<Mount> mount_;
  std::thread loop_;
  absl::Status loop_status_;
};

}  // namespace ckptfs::fuse

#endif  // CKPTFS_TESTS_FUSE_MOUNT_FIXTURE_H_
