// torch.save then torch.load through a ckptfs mount, with the torch of the
// build's Python environment (CKPTFS_PYTHON, torch 2.13): a dict of tensors of uneven sizes must
// load back equal, and an mmap read of the same file must match its bytes,
// through the default mount and through a --direct_io_reads one.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

#ifndef CKPTFS_PYTHON
#error "CKPTFS_PYTHON (the build's Python with torch) must be defined by the build"
#endif
constexpr char kPython[] = CKPTFS_PYTHON;

// Fails the test unless kPython can import torch.
void RequireTorch() {
  std::string probe;
  ASSERT_EQ(RunShell(absl::StrCat(kPython, " -c 'import torch'"), &probe), 0)
      << kPython << " cannot import torch; run scripts/install-python.sh test: " << probe;
}

class TorchTest : public MountedClusterTest {};

// Prepended to each script: whether two loaded states are equal, tensor by
// tensor (dtype, shape and bytes), through nested dicts.
constexpr char kSameHelper[] = R"PY(
import torch
def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
)PY";

// Saves a dict of tensors of uneven sizes (some over a 4 MiB chunk), loads it
// back and compares every tensor; prints "OK <bytes>" on success.
constexpr char kSaveLoadScript[] = R"PY(
import os, sys, torch
path = sys.argv[1]
torch.manual_seed(0)
state = {
    "embed.weight": torch.randn(1531, 1024),          # ~6.3 MB, crosses chunks
    "layer0.bias": torch.randn(7),
    "layer0.weight": torch.randn(333, 517).half(),
    "step": torch.tensor(1000),
    "empty": torch.empty(0),
    "ids": torch.arange(100003, dtype=torch.int64),
    "nested": {"opt": torch.randn(4096, 257)},
}
torch.save(state, path)
size = os.stat(path).st_size
back = torch.load(path)
if not same(state, back):
    print("MISMATCH"); sys.exit(1)
with open(path, "rb") as f:
    raw = f.read()
if len(raw) != size:
    print("SIZE", len(raw), size); sys.exit(1)
print("OK", size)
)PY";

TEST_F(TorchTest, SaveThenLoadIsEqualAndMmapMatches) {
  ASSERT_NO_FATAL_FAILURE(RequireTorch());
  const std::string script = cluster().root() + "/save_load.py";
  ASSERT_TRUE(WriteWholeFile(script, absl::StrCat(kSameHelper, kSaveLoadScript)).ok());
  const std::string ckpt = TestDir() + "/rank_00017.pt";
  std::string out;
  const int rc = RunShell(absl::StrCat(kPython, " ", script, " ", ckpt), &out);
  ASSERT_EQ(rc, 0) << out << "\n" << cluster().DescribeLogs();
  ASSERT_NE(out.find("OK "), std::string::npos) << out;

  // An mmap of the saved file matches what read(2) returns.
  auto bytes = ReadWholeFile(ckpt);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_GT(bytes->size(), 4u << 20);
  const int fd = ::open(ckpt.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, bytes->size(), PROT_READ, MAP_PRIVATE, fd, 0);
  ASSERT_NE(map, MAP_FAILED) << strerror(errno);
  EXPECT_EQ(0, memcmp(map, bytes->data(), bytes->size()));
  ::munmap(map, bytes->size());
  ::close(fd);
  // The zip container starts with a local file header ("PK\3\4").
  EXPECT_EQ(bytes->substr(0, 4), std::string("PK\3\4", 4));
}

// Loads the file at argv[1] (through the default mount) and at argv[2] (the
// same file through a --direct_io_reads mount) and compares every tensor;
// then maps argv[2] as numpy.memmap(mode="r") does (MAP_SHARED) and
// compares its bytes. Prints "OK" on success.
constexpr char kDirectLoadScript[] = R"PY(
import sys, numpy, torch
cached, direct = sys.argv[1], sys.argv[2]
a, b = torch.load(cached), torch.load(direct)
if not same(a, b):
    print("MISMATCH"); sys.exit(1)
with open(cached, "rb") as f:
    raw = f.read()
mapped = numpy.memmap(direct, dtype=numpy.uint8, mode="r")
if mapped.tobytes() != raw:
    print("MMAP MISMATCH"); sys.exit(1)
print("OK")
)PY";

// torch.load and a MAP_SHARED mapping through a mount whose read-only opens
// bypass the page cache (where the kernel allows it) see the saved bytes.
TEST_F(TorchTest, LoadThroughADirectIoReadsMountIsEqual) {
  ASSERT_NO_FATAL_FAILURE(RequireTorch());
  const std::string save = cluster().root() + "/save_load.py";
  const std::string load = cluster().root() + "/direct_load.py";
  ASSERT_TRUE(WriteWholeFile(save, absl::StrCat(kSameHelper, kSaveLoadScript)).ok());
  ASSERT_TRUE(WriteWholeFile(load, absl::StrCat(kSameHelper, kDirectLoadScript)).ok());
  const std::string ckpt = TestDir() + "/rank_00003.pt";
  std::string out;
  ASSERT_EQ(RunShell(absl::StrCat(kPython, " ", save, " ", ckpt), &out), 0)
      << out << "\n"
      << cluster().DescribeLogs();
  absl::StatusOr<std::string> direct = cluster().Mount("direct", {"--direct_io_reads"});
  ASSERT_TRUE(direct.ok()) << direct.status();
  const std::string through_direct = *direct + ckpt.substr(mnt().size());
  const int rc = RunShell(absl::StrCat(kPython, " ", load, " ", ckpt, " ", through_direct), &out);
  const std::string logs = cluster().DescribeLogs();  // the direct mount's too
  EXPECT_TRUE(cluster().Unmount(*direct).ok());
  ASSERT_EQ(rc, 0) << out << "\n" << logs;
  EXPECT_NE(out.find("OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace ckptfs::testing
