// libFuzzer entry of FuzzMetaOps (tests/fuzz/fuzz_targets.h). Built by
// tests/fuzz/libfuzzer/CMakeLists.txt with clang -fsanitize=fuzzer,address.
#include <cstddef>
#include <cstdint>

#include "common/log.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    ckptfs::SetMinLogSeverity(ckptfs::LogSeverity::kError);
    return true;
  }();
  (void)quiet;
  ckptfs::fuzz::FuzzMetaOps(data, size);
  return 0;
}
