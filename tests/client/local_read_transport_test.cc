// LocalReadTransport (client/local_read_transport.h): chunk files written by
// a real ChunkStore read back in place — empty, whole, in part, past the
// end, into one scratch buffer growing and reused — and every file that is not right
// (missing, a flipped data byte, a torn header, a header naming another
// chunk, cut short, a stray size) left to the server. Which servers count as
// local (uuid, alive, holding the running-lock of a real DataDirLock), that
// reads of local servers never reach the network while everything else
// does, that a killed server's files are not read, and the map's refresh.
#include "client/local_read_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/testing/fake_chunk_transport.h"
#include "client/testing/fake_meta_client.h"
#include "common/chunk_format.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/huge_page_memory.h"
#include "common/uring.h"
#include "gtest/gtest.h"
#include "server/storage/chunk_store.h"
#include "server/storage/data_dir.h"
#include "tests/integration/posix_io.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::client {
namespace {

using storage::ChunkStore;
using storage::DataDirLock;
using storage::TempDir;

constexpr char kUuid[] = "9d1c0a52-0000-4000-8000-00000000abcd";

using ckptfs::testing::PwriteFile;
using ckptfs::testing::ReadWholeFile;
using ckptfs::testing::TestData;
using ckptfs::testing::WriteWholeFile;

void WriteTextFile(const std::string& path, const std::string& text) {
  ASSERT_TRUE(WriteWholeFile(path, text).ok()) << path;
}

// Flips one bit of a file in place.
void FlipByte(const std::string& path, off_t offset) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  ASSERT_TRUE(bytes.ok() && static_cast<size_t>(offset) < bytes->size()) << path;
  const char flipped = static_cast<char>((*bytes)[static_cast<size_t>(offset)] ^ 0x40);
  ASSERT_TRUE(PwriteFile(path, static_cast<uint64_t>(offset), std::string(1, flipped)).ok());
}

class LocalReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto store = ChunkStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto ring = Ring::Create(16);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
  }

  void Store(uint64_t ino, uint32_t index, const std::string& data) {
    ASSERT_TRUE(store_->Write(*ring_, {ino, index}, 0, absl::string_view(data), true).ok());
  }

  // ReadChunkFile of [offset, offset + length): the bytes, or its error.
  // Read twice, into memory off the 4 KiB grid (data through the scratch
  // buffer) and into 4096-aligned memory (whole-chunk reads take the data
  // straight from the disk); both must give the same answer.
  absl::StatusOr<std::string> Read(uint64_t ino, uint32_t index, uint32_t offset,
                                   size_t length) {
    std::string unaligned(length + 1, '\xee');
    absl::StatusOr<size_t> got = LocalReadTransport::ReadChunkFile(
        dir_.path(), ino, index, offset, unaligned.data() + 1, length, scratch_);
    // A whole number of pages with an unwritable page right after them: a
    // read past `length` crashes the test instead of going unnoticed.
    const size_t pages = (std::max<size_t>(length, 1) + 4095) / 4096 * 4096;
    absl::StatusOr<HugePageMemory> aligned = HugePageMemory::Map(pages + 4096);
    EXPECT_TRUE(aligned.ok()) << aligned.status();
    if (!aligned.ok()) return aligned.status();
    EXPECT_EQ(::mprotect(aligned->data() + pages, 4096, PROT_NONE), 0);
    absl::StatusOr<size_t> got_aligned = LocalReadTransport::ReadChunkFile(
        dir_.path(), ino, index, offset, aligned->data(), length, scratch_);
    EXPECT_EQ(got.status().code(), got_aligned.status().code())
        << got.status() << " / " << got_aligned.status();
    if (!got.ok()) return got.status();
    std::string out = unaligned.substr(1, *got);
    EXPECT_TRUE(got_aligned.ok() && std::string(aligned->data(), *got_aligned) == out)
        << "the aligned read differs: " << got_aligned.status();
    return out;
  }
  // The bytes, or "<error>" when it failed.
  std::string ReadLocal(uint64_t ino, uint32_t index, uint32_t offset, size_t length) {
    absl::StatusOr<std::string> got = Read(ino, index, offset, length);
    return got.ok() ? *got : "<error>";
  }
  // The errno of its failure (0: it read).
  int ReadErrno(uint64_t ino, uint32_t index, size_t length = 1 << 20) {
    return ErrnoFromStatus(Read(ino, index, 0, length).status());
  }

  // How ListServers describes this directory's server.
  meta::ServerInfo Info() const {
    meta::ServerInfo info;
    info.set_id(1);
    info.set_address("127.0.0.1:7001");
    info.set_uuid(kUuid);
    info.set_alive(true);
    info.set_data_dir(dir_.path());
    return info;
  }

  // Makes the directory a running server's, as ckptfs-storage does: its
  // uuid, and the DataDirLock (with the running-lock) held by this process.
  void Claim() {
    WriteTextFile(dir_.path() + "/server.uuid", absl::StrCat(kUuid, "\n"));
    auto lock = DataDirLock::Acquire(dir_.path());
    ASSERT_TRUE(lock.ok()) << lock.status();
    lock_.emplace(*std::move(lock));
  }

  TempDir dir_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Ring> ring_;
  std::optional<DataDirLock> lock_;
  LocalReadTransport::Scratch scratch_;
};

TEST_F(LocalReadTest, ReadsWhatTheStoreWrote) {
  const size_t sizes[] = {0, 1, 4095, 4096, 5000, (1 << 20) - 4096, 1 << 20,
                          (3 << 20) + 123, 4 << 20};
  uint32_t index = 0;
  for (size_t size : sizes) {
    SCOPED_TRACE(absl::StrCat("chunk of ", size, " bytes"));
    const std::string data = TestData(size, index);
    Store(5, index, data);
    EXPECT_EQ(ReadLocal(5, index, 0, size), data);
    // Asked for more: cut at the stored length, as the server does.
    EXPECT_EQ(ReadLocal(5, index, 0, size + 8192), data);
    // A part in the middle, and one running past the end.
    const uint32_t mid = static_cast<uint32_t>(size / 3);
    EXPECT_EQ(ReadLocal(5, index, mid, size / 3), data.substr(mid, size / 3));
    EXPECT_EQ(ReadLocal(5, index, mid, size), data.substr(mid));
    // Wholly past the end: nothing.
    EXPECT_EQ(ReadLocal(5, index, static_cast<uint32_t>(size) + 10, 100), std::string());
    EXPECT_EQ(ReadLocal(5, index, 0, 0), std::string());
    ++index;
  }
}

TEST_F(LocalReadTest, AnythingOddIsLeftToTheServer) {
  const std::string data = TestData(3 * 4096 + 17, 1);
  for (uint32_t index = 0; index < 6; ++index) Store(9, index, data);
  ASSERT_EQ(ReadLocal(9, 0, 0, data.size()), data);

  // Never written (or set aside by the scrubber): ENOENT, as the server says.
  EXPECT_EQ(ReadErrno(9, 70), ENOENT);
  EXPECT_EQ(ReadErrno(10, 0), ENOENT);
  // A chunk index the data protocol cannot name.
  EXPECT_EQ(ErrnoFromStatus(LocalReadTransport::ReadChunkFile(
                                dir_.path(), 9, uint64_t{1} << 32, 0, nullptr, 0,
                                scratch_)
                                .status()),
            ENOENT);

  // A read no chunk can hold: the server refuses it, so it goes there.
  EXPECT_EQ(ErrnoFromStatus(Read(9, 0, kMaxFramePayload, 1).status()), EIO);

  // A data byte flipped on disk: the CRC32C catches it, whatever the read.
  FlipByte(store_->ChunkPath({9, 0}), kChunkHeaderSize + 2 * 4096);
  EXPECT_EQ(ReadErrno(9, 0), EIO);
  EXPECT_EQ(ReadErrno(9, 0, 100), EIO);
  // Verified in pieces as it is copied out: a flip in the last piece of a
  // whole chunk fails a read of its first bytes too.
  Store(9, 8, TestData(4 << 20, 8));
  FlipByte(store_->ChunkPath({9, 8}), kChunkHeaderSize + (4 << 20) - 1);
  EXPECT_EQ(ReadErrno(9, 8), EIO);
  EXPECT_EQ(ReadErrno(9, 8, 100), EIO);
  // A torn header: its own CRC catches it.
  FlipByte(store_->ChunkPath({9, 1}), 21);
  EXPECT_EQ(ReadErrno(9, 1), EIO);

  // A good file under another chunk's name, or another inode's.
  std::filesystem::copy_file(store_->ChunkPath({9, 2}), store_->ChunkPath({9, 7}));
  EXPECT_EQ(ReadErrno(9, 7), EIO);
  std::filesystem::create_directories(store_->InodeDir(11));
  std::filesystem::copy_file(store_->ChunkPath({9, 2}), store_->ChunkPath({11, 2}));
  EXPECT_EQ(ReadErrno(11, 2), EIO);
  ASSERT_EQ(ReadLocal(9, 2, 0, data.size()), data);  // the original is fine

  // Cut short (a file system that lost its tail), or not whole blocks.
  std::filesystem::resize_file(store_->ChunkPath({9, 3}), kChunkHeaderSize + 4096);
  EXPECT_EQ(ReadErrno(9, 3), EIO);
  std::filesystem::resize_file(store_->ChunkPath({9, 4}), ChunkFileSize(data.size()) + 100);
  EXPECT_EQ(ReadErrno(9, 4), EIO);
  std::filesystem::resize_file(store_->ChunkPath({9, 5}), 100);
  EXPECT_EQ(ReadErrno(9, 5), EIO);
}

TEST_F(LocalReadTest, ALocalServerIsAliveWithThisUuidAndHoldsItsRunningLock) {
  // No server.uuid and no lock yet: not local.
  EXPECT_FALSE(LocalReadTransport::FindLocal(Info()).has_value());
  Claim();
  auto found = LocalReadTransport::FindLocal(Info());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->data_dir, dir_.path());
  EXPECT_TRUE(LocalReadTransport::ServerRuns(found->lock->get()));

  meta::ServerInfo other_uuid = Info();
  other_uuid.set_uuid("another-server");
  EXPECT_FALSE(LocalReadTransport::FindLocal(other_uuid).has_value());
  meta::ServerInfo dead = Info();
  dead.set_alive(false);
  EXPECT_FALSE(LocalReadTransport::FindLocal(dead).has_value());
  meta::ServerInfo old_build = Info();
  old_build.clear_data_dir();
  EXPECT_FALSE(LocalReadTransport::FindLocal(old_build).has_value());
  meta::ServerInfo elsewhere = Info();
  elsewhere.set_data_dir(dir_.path() + "/not-here");
  EXPECT_FALSE(LocalReadTransport::FindLocal(elsewhere).has_value());

  // The server stopped (its DataDirLock is gone): no longer running, and
  // not found again, though LOCK still names a pid that runs (this one).
  lock_.reset();
  EXPECT_FALSE(LocalReadTransport::ServerRuns(found->lock->get()));
  EXPECT_FALSE(LocalReadTransport::FindLocal(Info()).has_value());
}

// ListServers names server 1 with this test's directory and server 2 with
// none (another host, or an older build); it can be made to fail.
class LocalServersMeta : public testing::FakeMetaClient {
 public:
  explicit LocalServersMeta(meta::ServerInfo local) : local_(std::move(local)) {}
  absl::StatusOr<meta::ListServersReply> ListServers(const meta::Empty&) override {
    absl::MutexLock lock(&mu_);
    ++list_calls_;
    if (fail_) return ErrnoStatus(EHOSTUNREACH, "the metadata service is away");
    meta::ListServersReply reply;
    *reply.add_servers() = local_;
    meta::ServerInfo* remote = reply.add_servers();
    remote->set_id(2);
    remote->set_address("127.0.0.1:7002");
    remote->set_uuid("remote");
    remote->set_alive(true);
    return reply;
  }
  int list_calls() {
    absl::MutexLock lock(&mu_);
    return list_calls_;
  }
  void set_fail(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_ = fail;
  }

 private:
  const meta::ServerInfo local_;
  absl::Mutex mu_;
  int list_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool fail_ ABSL_GUARDED_BY(mu_) = false;
};

TEST_F(LocalReadTest, LocalChunksNeverReachTheNetwork) {
  Claim();
  const std::string local = TestData(10000, 3);
  Store(4, 0, local);
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<testing::FakeChunkTransport>();
  testing::FakeChunkTransport* network = owned.get();
  const std::string remote = TestData(5000, 4);
  ASSERT_TRUE(network->WriteChunk(2, 4, 0, 0, remote.data(), remote.size(), true).ok());
  const std::string served = TestData(6000, 5);  // what server 1 answers for a chunk it has
  ASSERT_TRUE(network->WriteChunk(1, 4, 1, 0, served.data(), served.size(), true).ok());
  LocalReadTransport transport(std::move(owned), &meta, absl::Hours(1));

  std::string out(20000, '\0');
  auto got = transport.ReadChunk(1, 4, 0, 0, out.data(), out.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(out.substr(0, *got), local);
  EXPECT_EQ(network->counts().reads, 0);

  // Not in the file (here: the fake server holds it): asked over the network.
  got = transport.ReadChunk(1, 4, 1, 0, out.data(), out.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(out.substr(0, *got), served);
  EXPECT_EQ(network->counts().reads, 1);

  // Another host's server.
  got = transport.ReadChunk(2, 4, 0, 0, out.data(), out.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(out.substr(0, *got), remote);
  EXPECT_EQ(network->counts().reads, 2);

  // Writes always go to the server.
  ASSERT_TRUE(transport.WriteChunk(1, 4, 5, 0, local.data(), 10, true).ok());
  EXPECT_EQ(network->counts().writes, 3);
  EXPECT_EQ(meta.list_calls(), 1);  // loaded once, not per read
}

// A stand-in for a storage server's process: holds the data directory's
// DataDirLock until killed. Killed (and reaped) when it goes away.
class ServerProcess {
 public:
  explicit ServerProcess(const std::string& data_dir) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
      if (::getppid() != parent) ::_exit(1);
      auto lock = DataDirLock::Acquire(data_dir);
      const char ok = lock.ok() ? 1 : 0;
      (void)!::write(ready[1], &ok, 1);
      ::pause();
      ::_exit(0);
    }
    ::close(ready[1]);
    char ok = 0;
    struct pollfd wait_ready = {ready[0], POLLIN, 0};
    held_ = pid_ > 0 && ::poll(&wait_ready, 1, /*timeout_ms=*/10000) == 1 &&
            ::read(ready[0], &ok, 1) == 1 && ok == 1;
    ::close(ready[0]);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() { Kill(); }

  bool held() const { return held_; }
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  bool held_ = false;
};

TEST_F(LocalReadTest, AKilledServersFilesAreNotReadInItsPlace) {
  WriteTextFile(dir_.path() + "/server.uuid", absl::StrCat(kUuid, "\n"));
  ServerProcess server(dir_.path());
  ASSERT_TRUE(server.held());
  Store(4, 0, TestData(10000, 3));
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<testing::FakeChunkTransport>();
  testing::FakeChunkTransport* network = owned.get();
  network->SetServerDown(1, true);
  LocalReadTransport transport(std::move(owned), &meta, absl::Hours(1));
  std::string out(20000, '\0');
  EXPECT_TRUE(transport.ReadChunk(1, 4, 0, 0, out.data(), out.size()).ok());
  EXPECT_EQ(network->counts().reads, 0);

  // Killed: its files are not read any more, though the map still has it.
  server.Kill();
  EXPECT_FALSE(transport.ReadChunk(1, 4, 0, 0, out.data(), out.size()).ok());
  EXPECT_EQ(network->counts().reads, 1);
  EXPECT_EQ(meta.list_calls(), 1);
}

TEST_F(LocalReadTest, TheMapIsRefreshedInTheBackgroundAndKeptWhenTheServiceIsAway) {
  Store(4, 0, TestData(10000, 3));
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<testing::FakeChunkTransport>();
  testing::FakeChunkTransport* network = owned.get();
  ASSERT_TRUE(network->WriteChunk(1, 4, 0, 0, "net", 3, true).ok());
  LocalReadTransport transport(std::move(owned), &meta, absl::Milliseconds(20));
  std::string out(20000, '\0');
  // Not running yet at the first load: over the network.
  auto got = transport.ReadChunk(1, 4, 0, 0, out.data(), out.size());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, 3u);

  // The server starts; a refresh finds it.
  Claim();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  int network_reads = network->counts().reads;
  while (absl::Now() < deadline) {
    got = transport.ReadChunk(1, 4, 0, 0, out.data(), out.size());
    ASSERT_TRUE(got.ok());
    if (network->counts().reads == network_reads) break;  // read locally
    network_reads = network->counts().reads;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(*got, 10000u);

  // The service goes away: the map stays, reads stay local.
  meta.set_fail(true);
  const int calls = meta.list_calls();
  while (meta.list_calls() < calls + 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(meta.list_calls(), calls + 3);  // the refresher kept asking
  network_reads = network->counts().reads;
  got = transport.ReadChunk(1, 4, 0, 0, out.data(), out.size());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, 10000u);
  EXPECT_EQ(network->counts().reads, network_reads);
}

}  // namespace
}  // namespace ckptfs::client
