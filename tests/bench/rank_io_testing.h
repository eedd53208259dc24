// RecordingRankIo: a RankIo for tests that forwards to another one, records
// the size of every Write and can make calls fail with a chosen errno.
//
// Thread-safety: like any RankIo, one thread at a time.
#ifndef CKPTFS_TESTS_BENCH_RANK_IO_TESTING_H_
#define CKPTFS_TESTS_BENCH_RANK_IO_TESTING_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/rank_io.h"
#include "common/errno_status.h"

namespace ckptfs::bench::testing {

class RecordingRankIo : public RankIo {
 public:
  explicit RecordingRankIo(RankIo& inner) : inner_(inner) {}

  // Every Write after the next `after` ones fails with `err` (0: none).
  void FailWrites(int err, int after = 0) {
    fail_write_err_ = err;
    writes_before_failure_ = after;
  }

  const std::vector<size_t>& write_sizes() const { return write_sizes_; }
  int fsyncs() const { return fsyncs_; }

  absl::StatusOr<int> Create(absl::string_view path) override { return inner_.Create(path); }
  absl::StatusOr<int> OpenRead(absl::string_view path) override { return inner_.OpenRead(path); }
  absl::Status Write(int handle, const void* data, size_t size) override {
    if (fail_write_err_ != 0 && writes_before_failure_-- <= 0) {
      return ErrnoStatus(fail_write_err_, absl::StrCat("injected write failure, handle ", handle));
    }
    write_sizes_.push_back(size);
    return inner_.Write(handle, data, size);
  }
  absl::StatusOr<size_t> Read(int handle, void* data, size_t size) override {
    return inner_.Read(handle, data, size);
  }
  absl::Status Fsync(int handle) override {
    ++fsyncs_;
    return inner_.Fsync(handle);
  }
  absl::Status Close(int handle) override { return inner_.Close(handle); }
  absl::Status Rename(absl::string_view from, absl::string_view to) override {
    return inner_.Rename(from, to);
  }
  absl::Status Unlink(absl::string_view path) override { return inner_.Unlink(path); }
  absl::Status MakeDirs(absl::string_view path) override { return inner_.MakeDirs(path); }
  absl::Status RemoveTree(absl::string_view path) override { return inner_.RemoveTree(path); }
  absl::Status SetXattr(absl::string_view path, absl::string_view name,
                        absl::string_view value) override {
    return inner_.SetXattr(path, name, value);
  }
  absl::StatusOr<std::string> GetXattr(absl::string_view path, absl::string_view name) override {
    return inner_.GetXattr(path, name);
  }

 private:
  RankIo& inner_;
  std::vector<size_t> write_sizes_;
  int fsyncs_ = 0;
  int fail_write_err_ = 0;
  int writes_before_failure_ = 0;
};

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
// when the TempDir goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Reads a whole file; "" if it cannot be read.
std::string ReadWholeFile(const std::string& path);
// Writes `data` at `offset` of an existing file (pwrite).
void PatchFile(const std::string& path, uint64_t offset, const std::string& data);

}  // namespace ckptfs::bench::testing

#endif  // CKPTFS_TESTS_BENCH_RANK_IO_TESTING_H_
