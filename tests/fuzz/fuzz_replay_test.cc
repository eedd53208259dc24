// Replays every input kept under tests/fuzz/corpus/<target>/ — the seeds and
// the inputs that once crashed a fuzzer (each named crash-*, with the fix
// in the commit that added it) — through the same fuzz functions the
// libFuzzer binaries run. Part of every normal build's tests, so a fixed
// bug cannot come back unnoticed. A broken property aborts the test binary
// (fuzz_input.h) after printing the input's path.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "common/log.h"
#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_targets.h"

namespace ckptfs::fuzz {
namespace {

struct Target {
  const char* name;
  void (*fn)(const uint8_t*, size_t);
};

void PrintTo(const Target& target, std::ostream* os) { *os << target.name; }

class FuzzReplayTest : public ::testing::TestWithParam<Target> {};

std::vector<std::filesystem::path> Inputs(const std::string& target) {
  std::vector<std::filesystem::path> files;
  const std::filesystem::path dir = std::filesystem::path(CKPTFS_FUZZ_CORPUS_DIR) / target;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST_P(FuzzReplayTest, EveryKeptInputPasses) {
  SetMinLogSeverity(LogSeverity::kError);
  const std::vector<std::filesystem::path> files = Inputs(GetParam().name);
  // Seeds at least: a missing corpus would make this test pass vacuously.
  ASSERT_GE(files.size(), 3u) << "no corpus under " << CKPTFS_FUZZ_CORPUS_DIR;
  for (const auto& path : files) {
    std::ifstream file(path, std::ios::binary);
    ASSERT_TRUE(file) << path;
    const std::string bytes((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replaying %s\n", path.c_str());
    GetParam().fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  // The empty input and a lone byte of every value are programs too.
  GetParam().fn(nullptr, 0);
  for (int b = 0; b < 256; ++b) {
    const uint8_t byte = static_cast<uint8_t>(b);
    GetParam().fn(&byte, 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplayTest,
                         ::testing::Values(Target{"frame", &FuzzFrame},
                                           Target{"storage", &FuzzStorageRequests},
                                           Target{"meta", &FuzzMetaOps}),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace ckptfs::fuzz
