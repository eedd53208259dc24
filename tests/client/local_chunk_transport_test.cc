// LocalChunkTransport (client/local_chunk_transport.h): chunk files written by
// a real ChunkStore read back in place — empty, whole, in part, past the
// end, into one scratch buffer growing and reused — and every file that is not right
// (missing, a flipped data byte, a torn header, a header naming another
// chunk, cut short, a stray size) left to the server. Which servers count as
// local (uuid, alive, holding the running-lock of a real DataDirLock), that
// reads of local servers never reach the network while everything else
// does, that a killed server's files are not read, and the map's refresh.
// Writes in place: the chunk files written for a real ChunkStore to adopt
// read back as the store's own, ChunkStore::Adopt refuses every file that
// is not the chunk's, abandoned files are swept, and whatever cannot be
// written in place (merges, unaligned memory, a remote or dead server, a
// refusal, a server that does not know ADOPT) goes over the network and
// leaves nothing in tmp/.
#include "client/local_chunk_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/testing/fake_chunk_transport.h"
#include "client/testing/in_process_meta.h"
#include "client/testing/recording_meta_client.h"
#include "common/chunk_format.h"
#include "common/crc32c.h"
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

using storage::AlignedBuffer;
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

class LocalChunkTest : public ::testing::Test {
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
  absl::StatusOr<std::string> Read(uint64_t ino, uint32_t index, uint32_t offset, size_t length) {
    std::string unaligned(length + 1, '\xee');
    absl::StatusOr<size_t> got = LocalChunkTransport::ReadChunkFile(
        dir_.path(), ino, index, offset, unaligned.data() + 1, length, scratch_);
    // A whole number of pages with an unwritable page right after them: a
    // read past `length` crashes the test instead of going unnoticed.
    const size_t pages = (std::max<size_t>(length, 1) + 4095) / 4096 * 4096;
    absl::StatusOr<HugePageMemory> aligned = HugePageMemory::Map(pages + 4096);
    EXPECT_TRUE(aligned.ok()) << aligned.status();
    if (!aligned.ok()) return aligned.status();
    EXPECT_EQ(::mprotect(aligned->data() + pages, 4096, PROT_NONE), 0);
    absl::StatusOr<size_t> got_aligned = LocalChunkTransport::ReadChunkFile(
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
  LocalChunkTransport::Scratch scratch_;
};

TEST_F(LocalChunkTest, ReadsWhatTheStoreWrote) {
  const size_t sizes[] = {0,      1, 4095, 4096, 5000, (1 << 20) - 4096, 1 << 20, (3 << 20) + 123,
                          4 << 20};
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

TEST_F(LocalChunkTest, AnythingOddIsLeftToTheServer) {
  const std::string data = TestData(3 * 4096 + 17, 1);
  for (uint32_t index = 0; index < 6; ++index) Store(9, index, data);
  ASSERT_EQ(ReadLocal(9, 0, 0, data.size()), data);

  // Never written (or set aside by the scrubber): ENOENT, as the server says.
  EXPECT_EQ(ReadErrno(9, 70), ENOENT);
  EXPECT_EQ(ReadErrno(10, 0), ENOENT);
  // A chunk index the data protocol cannot name.
  EXPECT_EQ(ErrnoFromStatus(LocalChunkTransport::ReadChunkFile(dir_.path(), 9, uint64_t{1} << 32, 0,
                                                               nullptr, 0, scratch_)
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

TEST_F(LocalChunkTest, ALocalServerIsAliveWithThisUuidAndHoldsItsRunningLock) {
  // No server.uuid and no lock yet: not local.
  EXPECT_FALSE(LocalChunkTransport::FindLocal(Info()).has_value());
  Claim();
  auto found = LocalChunkTransport::FindLocal(Info());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->data_dir, dir_.path());
  EXPECT_TRUE(LocalChunkTransport::ServerRuns(found->lock->get()));

  meta::ServerInfo other_uuid = Info();
  other_uuid.set_uuid("another-server");
  EXPECT_FALSE(LocalChunkTransport::FindLocal(other_uuid).has_value());
  meta::ServerInfo dead = Info();
  dead.set_alive(false);
  EXPECT_FALSE(LocalChunkTransport::FindLocal(dead).has_value());
  meta::ServerInfo old_build = Info();
  old_build.clear_data_dir();
  EXPECT_FALSE(LocalChunkTransport::FindLocal(old_build).has_value());
  meta::ServerInfo elsewhere = Info();
  elsewhere.set_data_dir(dir_.path() + "/not-here");
  EXPECT_FALSE(LocalChunkTransport::FindLocal(elsewhere).has_value());

  // The server stopped (its DataDirLock is gone): no longer running, and
  // not found again, though LOCK still names a pid that runs (this one).
  lock_.reset();
  EXPECT_FALSE(LocalChunkTransport::ServerRuns(found->lock->get()));
  EXPECT_FALSE(LocalChunkTransport::FindLocal(Info()).has_value());
}

// The metadata service in-process with two storage servers: server 1 with
// this test's directory, server 2 with none (another host, or an older
// build). Its ListServers calls are counted and can be made to fail.
class LocalServersMeta {
 public:
  explicit LocalServersMeta(const meta::ServerInfo& local) {
    testing::InProcessMetaService::Options options;
    options.storage_servers = 0;
    auto service = testing::InProcessMetaService::Start(options);
    EXPECT_TRUE(service.ok()) << service.status();
    if (!service.ok()) return;
    service_ = *std::move(service);
    meta::RegisterServerRequest request;
    request.set_uuid(local.uuid());
    request.set_address(local.address());
    request.set_data_dir(local.data_dir());
    EXPECT_EQ(Register(request), local.id());
    request.set_uuid("remote");
    request.set_address("127.0.0.1:7002");
    request.clear_data_dir();
    EXPECT_EQ(Register(request), 2u);
    meta_ = std::make_unique<testing::RecordingMetaClient>(service_->NewClient());
  }
  MetaClient* client() { return meta_.get(); }
  int list_calls() { return meta_->Calls("ListServers"); }
  // From now on every ListServers fails: the service is away.
  void set_fail() {
    meta_->FailNext("ListServers", ErrnoStatus(EHOSTUNREACH, "the metadata service is away"),
                    std::numeric_limits<int>::max());
  }

 private:
  uint32_t Register(const meta::RegisterServerRequest& request) {
    auto id = service_->RegisterServer(request);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }

  std::unique_ptr<testing::InProcessMetaService> service_;
  std::unique_ptr<testing::RecordingMetaClient> meta_;  // goes first
};

TEST_F(LocalChunkTest, LocalChunksNeverReachTheNetwork) {
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
  LocalChunkTransport transport(std::move(owned), meta.client(), absl::Hours(1));

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

  // Writes from memory off the 4 KiB grid go to the server (and this
  // network cannot ADOPT anyway).
  ASSERT_TRUE(transport.WriteChunk(1, 4, 5, 0, local.data() + 1, 10, true).ok());
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

TEST_F(LocalChunkTest, AKilledServersFilesAreNotReadInItsPlace) {
  WriteTextFile(dir_.path() + "/server.uuid", absl::StrCat(kUuid, "\n"));
  ServerProcess server(dir_.path());
  ASSERT_TRUE(server.held());
  Store(4, 0, TestData(10000, 3));
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<testing::FakeChunkTransport>();
  testing::FakeChunkTransport* network = owned.get();
  network->SetServerDown(1, true);
  LocalChunkTransport transport(std::move(owned), meta.client(), absl::Hours(1));
  std::string out(20000, '\0');
  EXPECT_TRUE(transport.ReadChunk(1, 4, 0, 0, out.data(), out.size()).ok());
  EXPECT_EQ(network->counts().reads, 0);

  // Killed: its files are not read any more, though the map still has it.
  server.Kill();
  EXPECT_FALSE(transport.ReadChunk(1, 4, 0, 0, out.data(), out.size()).ok());
  EXPECT_EQ(network->counts().reads, 1);
  EXPECT_EQ(meta.list_calls(), 1);
}

TEST_F(LocalChunkTest, TheMapIsRefreshedInTheBackgroundAndKeptWhenTheServiceIsAway) {
  Store(4, 0, TestData(10000, 3));
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<testing::FakeChunkTransport>();
  testing::FakeChunkTransport* network = owned.get();
  ASSERT_TRUE(network->WriteChunk(1, 4, 0, 0, "net", 3, true).ok());
  LocalChunkTransport transport(std::move(owned), meta.client(), absl::Milliseconds(20));
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
  meta.set_fail();
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

// Aligned memory holding `data` (a ChunkBuffer stand-in).
HugePageMemory Aligned(const std::string& data) {
  absl::StatusOr<HugePageMemory> memory = HugePageMemory::Map(std::max<size_t>(data.size(), 1));
  EXPECT_TRUE(memory.ok()) << memory.status();
  if (!memory.ok()) return HugePageMemory();
  std::memcpy(memory->data(), data.data(), data.size());
  return *std::move(memory);
}

// The names in the store's tmp/ (none when there is no tmp/).
std::vector<std::string> TmpNames(const std::string& data_dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(TmpDirectory(data_dir), error)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

TEST_F(LocalChunkTest, ChunkFilesWrittenForAdoptionReadAsTheStoresOwn) {
  const size_t sizes[] = {1, 4095, 4096, 5000, 1 << 20, (3 << 20) + 123, 4 << 20};
  uint32_t index = 0;
  for (size_t size : sizes) {
    SCOPED_TRACE(absl::StrCat("chunk of ", size, " bytes"));
    const std::string data = TestData(size, index + 40);
    HugePageMemory memory = Aligned(data);
    const uint32_t crc = Crc32c(data.data(), data.size());
    absl::StatusOr<std::string> name =
        LocalChunkTransport::WriteChunkFile(dir_.path(), 6, index, memory.data(), size, crc);
    ASSERT_TRUE(name.ok()) << name.status();
    EXPECT_TRUE(IsLocalWriteName(*name)) << *name;
    ASSERT_TRUE(store_->Adopt({6, index}, *name, static_cast<uint32_t>(size), crc).ok());
    // The store reads it as its own (size, header, CRC), and so does a
    // local read.
    AlignedBuffer buffer;
    auto slice = store_->Read(*ring_, buffer, {6, index}, 0, static_cast<uint32_t>(size));
    ASSERT_TRUE(slice.ok()) << slice.status();
    EXPECT_EQ(std::string(slice->data), data);
    EXPECT_EQ(ReadLocal(6, index, 0, size), data);
    EXPECT_EQ(std::filesystem::file_size(store_->ChunkPath({6, index})), ChunkFileSize(size));
    EXPECT_TRUE(TmpNames(dir_.path()).empty());
    ++index;
  }
  // Two files for one chunk: the later adopt replaces the chunk.
  const std::string newer = TestData(7000, 99);
  HugePageMemory memory = Aligned(newer);
  const uint32_t crc = Crc32c(newer.data(), newer.size());
  auto name = LocalChunkTransport::WriteChunkFile(dir_.path(), 6, 0, memory.data(), 7000, crc);
  ASSERT_TRUE(name.ok());
  ASSERT_TRUE(store_->Adopt({6, 0}, *name, 7000, crc).ok());
  EXPECT_EQ(ReadLocal(6, 0, 0, 1 << 20), newer);
  // Not aligned, or too long: refused before anything is made.
  EXPECT_EQ(ErrnoFromStatus(
                LocalChunkTransport::WriteChunkFile(dir_.path(), 6, 9, memory.data() + 1, 100, 0)
                    .status()),
            EINVAL);
  EXPECT_TRUE(TmpNames(dir_.path()).empty());
}

TEST_F(LocalChunkTest, AdoptRefusesWhatIsNotThatChunksFile) {
  const std::string old = TestData(5000, 1);
  Store(6, 0, old);
  const std::string data = TestData(9000, 2);
  const uint32_t crc = Crc32c(data.data(), data.size());
  HugePageMemory memory = Aligned(data);
  auto name = LocalChunkTransport::WriteChunkFile(dir_.path(), 6, 0, memory.data(), 9000, crc);
  ASSERT_TRUE(name.ok()) << name.status();
  auto adopt_errno = [&](ChunkKey key, const std::string& tmp_name, uint32_t length,
                         uint32_t data_crc) {
    return ErrnoFromStatus(store_->Adopt(key, tmp_name, length, data_crc));
  };
  // Names that are not a client's file in tmp/.
  const std::string bad_names[] = {"x", "local.", "local.a/../../chunks/6/0", "0.0.1",
                                   std::string("local.a\0b", 9)};
  for (const std::string& bad : bad_names) {
    EXPECT_EQ(adopt_errno({6, 0}, bad, 9000, crc), EINVAL) << bad;
  }
  EXPECT_EQ(adopt_errno({6, 0}, "local.no-such-file", 9000, crc), ENOENT);
  // The file names another chunk, or other bytes, than the request.
  EXPECT_EQ(adopt_errno({6, 1}, *name, 9000, crc), EINVAL);
  EXPECT_EQ(adopt_errno({7, 0}, *name, 9000, crc), EINVAL);
  EXPECT_EQ(adopt_errno({6, 0}, *name, 8999, crc), EINVAL);
  EXPECT_EQ(adopt_errno({6, 0}, *name, 9000, crc ^ 1), EINVAL);
  // A refused file stays for its writer; the chunk is untouched.
  EXPECT_EQ(TmpNames(dir_.path()), std::vector<std::string>{*name});
  EXPECT_EQ(ReadLocal(6, 0, 0, 1 << 20), old);
  // Cut short, or a torn header.
  const std::string path = TmpDirectory(dir_.path()) + "/" + *name;
  std::filesystem::resize_file(path, ChunkFileSize(9000) - 4096);
  EXPECT_EQ(adopt_errno({6, 0}, *name, 9000, crc), EINVAL);
  std::filesystem::resize_file(path, ChunkFileSize(9000));
  FlipByte(path, 21);
  EXPECT_EQ(adopt_errno({6, 0}, *name, 9000, crc), EINVAL);
  // Not a regular file.
  const std::string tmp = TmpDirectory(dir_.path());
  std::filesystem::create_symlink(store_->ChunkPath({6, 0}), tmp + "/local.link");
  EXPECT_EQ(adopt_errno({6, 0}, "local.link", 5000, Crc32c(old.data(), old.size())), EINVAL);
  std::filesystem::create_directory(tmp + "/local.dir");
  EXPECT_EQ(adopt_errno({6, 0}, "local.dir", 0, 0), EINVAL);
  EXPECT_EQ(ReadLocal(6, 0, 0, 1 << 20), old);
}

TEST_F(LocalChunkTest, ClientFilesLeftInTmpAreSweptAfterTheirAge) {
  const std::string tmp = TmpDirectory(dir_.path());
  for (const char* name : {"local.old", "local.new", "0.0.7"}) {
    WriteTextFile(tmp + "/" + name, "x");
  }
  const struct timespec two_hours_ago[2] = {{::time(nullptr) - 7200, 0},
                                            {::time(nullptr) - 7200, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (tmp + "/local.old").c_str(), two_hours_ago, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, (tmp + "/0.0.7").c_str(), two_hours_ago, 0), 0);
  auto removed = store_->RemoveAbandonedLocalWrites(absl::Hours(1));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1u);
  std::vector<std::string> left = TmpNames(dir_.path());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"0.0.7", "local.new"}));
}

// The network of the write tests: a FakeChunkTransport whose server 1 hands
// ADOPT requests to the test's ChunkStore, as ckptfs-storage does; or
// refuses them with a given errno, before or (a lost reply) after adopting.
// Notes whether a WRITE ever arrived while a client file was in tmp/.
class AdoptingTransport : public testing::FakeChunkTransport {
 public:
  explicit AdoptingTransport(ChunkStore* store) : store_(store) {}
  absl::Status AdoptChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                          const std::string& tmp_name, uint32_t data_length,
                          uint32_t data_crc32c) override {
    absl::MutexLock lock(&mu_);
    ++adopts_;
    if (refuse_ != 0 && !after_) return ErrnoStatus(refuse_, "refused by the test");
    if (server_id != 1) return ErrnoStatus(EIO, "only server 1 runs on this host");
    absl::Status adopted = store_->Adopt({ino, static_cast<uint32_t>(chunk_index)}, tmp_name,
                                         data_length, data_crc32c);
    if (adopted.ok() && refuse_ != 0) return ErrnoStatus(refuse_, "reply lost in the test");
    return adopted;
  }
  using ChunkTransport::WriteChunk;
  absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, uint32_t offset,
                          const void* data, size_t length, bool replace,
                          std::optional<uint32_t> crc32c) override {
    if (!TmpNames(store_->data_dir()).empty()) {
      absl::MutexLock lock(&mu_);
      ++writes_beside_a_client_file_;
    }
    return FakeChunkTransport::WriteChunk(server_id, ino, chunk_index, offset, data, length,
                                          replace, crc32c);
  }
  // Refuses every ADOPT with `err` (0: none); `after`: adopts first.
  void Refuse(int err, bool after = false) {
    absl::MutexLock lock(&mu_);
    refuse_ = err;
    after_ = after;
  }
  int adopts() {
    absl::MutexLock lock(&mu_);
    return adopts_;
  }
  int writes_beside_a_client_file() {
    absl::MutexLock lock(&mu_);
    return writes_beside_a_client_file_;
  }

 private:
  ChunkStore* const store_;
  absl::Mutex mu_;
  int adopts_ ABSL_GUARDED_BY(mu_) = 0;
  int refuse_ ABSL_GUARDED_BY(mu_) = 0;
  bool after_ ABSL_GUARDED_BY(mu_) = false;
  int writes_beside_a_client_file_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(LocalChunkTest, WholeChunksOfALocalServerAreWrittenInPlace) {
  Claim();
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<AdoptingTransport>(store_.get());
  AdoptingTransport* network = owned.get();
  LocalChunkTransport transport(std::move(owned), meta.client(), absl::Hours(1));
  const std::string data = TestData((3 << 20) + 5, 7);
  HugePageMemory memory = Aligned(data);

  ASSERT_TRUE(transport.WriteChunk(1, 8, 0, 0, memory.data(), data.size(), true).ok());
  EXPECT_EQ(network->adopts(), 1);
  EXPECT_EQ(network->counts().writes, 0);
  EXPECT_EQ(ReadLocal(8, 0, 0, 4 << 20), data);
  EXPECT_TRUE(TmpNames(dir_.path()).empty());

  // A merge from the chunk's start (a file's last chunk) into a chunk no
  // longer than it: in place too.
  ASSERT_TRUE(transport.WriteChunk(1, 8, 1, 0, memory.data(), 100, false).ok());
  EXPECT_EQ(network->adopts(), 2);
  EXPECT_EQ(ReadLocal(8, 1, 0, 4096), data.substr(0, 100));

  // Not from the chunk's start, not from aligned memory, empty: over the
  // network.
  ASSERT_TRUE(transport.WriteChunk(1, 8, 0, 4096, memory.data(), 100, false).ok());
  ASSERT_TRUE(transport.WriteChunk(1, 8, 2, 0, memory.data() + 8, 100, true).ok());
  ASSERT_TRUE(transport.WriteChunk(1, 8, 3, 0, memory.data(), 0, true).ok());
  // Another host's server.
  ASSERT_TRUE(transport.WriteChunk(2, 8, 0, 0, memory.data(), data.size(), true).ok());
  EXPECT_EQ(network->counts().writes, 4);
  EXPECT_EQ(network->adopts(), 2);

  // Writes in place turned off.
  LocalChunkUse reads_only;
  reads_only.writes = false;
  auto owned2 = std::make_unique<AdoptingTransport>(store_.get());
  AdoptingTransport* network2 = owned2.get();
  LocalChunkTransport reader(std::move(owned2), meta.client(), absl::Hours(1), reads_only);
  ASSERT_TRUE(reader.WriteChunk(1, 8, 5, 0, memory.data(), data.size(), true).ok());
  EXPECT_EQ(network2->adopts(), 0);
  EXPECT_EQ(network2->counts().writes, 1);
}

TEST_F(LocalChunkTest, WhatIsNotWrittenInPlaceGoesOverTheNetworkAndLeavesNothing) {
  Claim();
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<AdoptingTransport>(store_.get());
  AdoptingTransport* network = owned.get();
  LocalChunkTransport transport(std::move(owned), meta.client(), absl::Hours(1));
  const std::string data = TestData(50000, 8);
  HugePageMemory memory = Aligned(data);
  auto write = [&](uint32_t index) {
    return transport.WriteChunk(1, 9, index, 0, memory.data(), data.size(), true);
  };

  // The server refuses (or fails) the ADOPT: sent over the network, the
  // file removed, and asked again next time.
  network->Refuse(EINVAL);
  ASSERT_TRUE(write(0).ok());
  EXPECT_EQ(network->adopts(), 1);
  EXPECT_EQ(network->counts().writes, 1);
  EXPECT_EQ(network->ChunkBytes(1, 9, 0), data);
  EXPECT_TRUE(TmpNames(dir_.path()).empty());
  ASSERT_TRUE(write(1).ok());
  EXPECT_EQ(network->adopts(), 2);

  // The file cannot be made (no tmp/): over the network.
  network->Refuse(0);
  std::filesystem::rename(TmpDirectory(dir_.path()), dir_.path() + "/tmp.away");
  ASSERT_TRUE(write(2).ok());
  EXPECT_EQ(network->adopts(), 2);
  EXPECT_EQ(network->counts().writes, 3);
  std::filesystem::rename(dir_.path() + "/tmp.away", TmpDirectory(dir_.path()));

  // A server that does not know ADOPT (an older build): not asked again.
  network->Refuse(EOPNOTSUPP);
  ASSERT_TRUE(write(3).ok());
  ASSERT_TRUE(write(4).ok());
  EXPECT_EQ(network->adopts(), 3);
  EXPECT_EQ(network->counts().writes, 5);
  EXPECT_TRUE(TmpNames(dir_.path()).empty());
  EXPECT_FALSE(std::filesystem::exists(store_->ChunkPath({9, 4})));

  // Adopted, but the reply was lost: sent again over the network (the same
  // bytes), nothing left in tmp/.
  auto owned2 = std::make_unique<AdoptingTransport>(store_.get());
  AdoptingTransport* network2 = owned2.get();
  LocalChunkTransport transport2(std::move(owned2), meta.client(), absl::Hours(1));
  network2->Refuse(ETIMEDOUT, /*after=*/true);
  ASSERT_TRUE(transport2.WriteChunk(1, 9, 6, 0, memory.data(), data.size(), true).ok());
  EXPECT_EQ(network2->adopts(), 1);
  EXPECT_EQ(network2->counts().writes, 1);
  EXPECT_EQ(ReadLocal(9, 6, 0, 1 << 20), data);
  EXPECT_TRUE(TmpNames(dir_.path()).empty());

  // Every resend went out once the refused file was gone.
  EXPECT_EQ(network->writes_beside_a_client_file(), 0);
  EXPECT_EQ(network2->writes_beside_a_client_file(), 0);
}

// Another client wrote the chunk past this client's end of file: adopting
// this client's shorter file would drop those bytes, so the store refuses
// it, and the write goes over the network as the merge it is.
TEST_F(LocalChunkTest, AFileShorterThanTheStoredChunkIsNeverAdopted) {
  const std::string theirs = TestData(9000, 31);
  Store(6, 2, theirs);
  for (const size_t mine : {size_t{100}, size_t{8192}, size_t{8999}}) {
    SCOPED_TRACE(absl::StrCat(mine, " bytes offered over ", theirs.size()));
    const std::string data = TestData(mine, 32);
    HugePageMemory memory = Aligned(data);
    const uint32_t crc = Crc32c(data.data(), data.size());
    auto name = LocalChunkTransport::WriteChunkFile(dir_.path(), 6, 2, memory.data(), mine, crc);
    ASSERT_TRUE(name.ok()) << name.status();
    EXPECT_EQ(ErrnoFromStatus(store_->Adopt({6, 2}, *name, static_cast<uint32_t>(mine), crc)),
              EEXIST);
    EXPECT_EQ(ReadLocal(6, 2, 0, 1 << 20), theirs);
    EXPECT_EQ(TmpNames(dir_.path()), std::vector<std::string>{*name});
    std::filesystem::remove(TmpDirectory(dir_.path()) + "/" + *name);
  }
  // As long as the stored chunk, or longer: adopted.
  const std::string longer = TestData(9000, 33);
  HugePageMemory memory = Aligned(longer);
  const uint32_t crc = Crc32c(longer.data(), longer.size());
  auto name = LocalChunkTransport::WriteChunkFile(dir_.path(), 6, 2, memory.data(), 9000, crc);
  ASSERT_TRUE(name.ok()) << name.status();
  ASSERT_TRUE(store_->Adopt({6, 2}, *name, 9000, crc).ok());
  EXPECT_EQ(ReadLocal(6, 2, 0, 1 << 20), longer);

  // Through the transport: the refused file goes, and the bytes go over the
  // network as the merge the caller asked for.
  Claim();
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<AdoptingTransport>(store_.get());
  AdoptingTransport* network = owned.get();
  LocalChunkTransport transport(std::move(owned), meta.client(), absl::Hours(1));
  const std::string front = TestData(4096, 34);
  HugePageMemory front_memory = Aligned(front);
  ASSERT_TRUE(transport.WriteChunk(1, 6, 2, 0, front_memory.data(), front.size(), false).ok());
  EXPECT_EQ(network->adopts(), 1);
  EXPECT_EQ(network->counts().writes, 1);
  EXPECT_EQ(network->counts().replace_writes, 0);
  EXPECT_EQ(ReadLocal(6, 2, 0, 1 << 20), longer);
  EXPECT_TRUE(TmpNames(dir_.path()).empty());
}

TEST_F(LocalChunkTest, AServerThatCannotAdoptIsAskedAgainAfterAWhile) {
  Claim();
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<AdoptingTransport>(store_.get());
  AdoptingTransport* network = owned.get();
  LocalChunkUse use;
  use.adopt_retry = absl::Milliseconds(200);
  LocalChunkTransport transport(std::move(owned), meta.client(), absl::Hours(1), use);
  const std::string data = TestData(4096, 10);
  HugePageMemory memory = Aligned(data);
  network->Refuse(EOPNOTSUPP);
  const absl::Time marked = absl::Now();
  ASSERT_TRUE(transport.WriteChunk(1, 3, 0, 0, memory.data(), data.size(), true).ok());
  EXPECT_EQ(network->adopts(), 1);
  // Within adopt_retry: not asked (200 ms is far longer than one write).
  ASSERT_TRUE(transport.WriteChunk(1, 3, 1, 0, memory.data(), data.size(), true).ok());
  if (absl::Now() - marked < absl::Milliseconds(200)) {
    EXPECT_EQ(network->adopts(), 1);
  }
  EXPECT_EQ(network->counts().writes, 2);
  // Upgraded meanwhile: once adopt_retry is over, written in place again.
  network->Refuse(0);
  absl::SleepFor(absl::Milliseconds(250));
  ASSERT_TRUE(transport.WriteChunk(1, 3, 2, 0, memory.data(), data.size(), true).ok());
  EXPECT_EQ(network->adopts(), 2);
  EXPECT_EQ(network->counts().writes, 2);
  EXPECT_EQ(ReadLocal(3, 2, 0, 8192), data);
}

TEST_F(LocalChunkTest, AKilledServersChunksAreNotWrittenInItsPlace) {
  WriteTextFile(dir_.path() + "/server.uuid", absl::StrCat(kUuid, "\n"));
  ServerProcess server(dir_.path());
  ASSERT_TRUE(server.held());
  LocalServersMeta meta(Info());
  auto owned = std::make_unique<AdoptingTransport>(store_.get());
  AdoptingTransport* network = owned.get();
  LocalChunkTransport transport(std::move(owned), meta.client(), absl::Hours(1));
  const std::string data = TestData(8192, 9);
  HugePageMemory memory = Aligned(data);
  ASSERT_TRUE(transport.WriteChunk(1, 4, 0, 0, memory.data(), data.size(), true).ok());
  EXPECT_EQ(network->adopts(), 1);
  server.Kill();
  ASSERT_TRUE(transport.WriteChunk(1, 4, 1, 0, memory.data(), data.size(), true).ok());
  EXPECT_EQ(network->adopts(), 1);
  EXPECT_EQ(network->counts().writes, 1);
}

}  // namespace
}  // namespace ckptfs::client
