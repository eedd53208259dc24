// JsonWriter: a small streaming JSON writer (objects, arrays, strings,
// numbers, booleans, null) with correct string escaping; non-finite numbers
// are written as null. Commas are placed automatically.
//
// Thread-safety: not thread-safe; one writer per document.
#ifndef CKPTFS_BENCH_JSON_WRITER_H_
#define CKPTFS_BENCH_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ckptfs::bench {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // REQUIRES: inside an object, before each value.
  JsonWriter& Key(absl::string_view key);
  JsonWriter& String(absl::string_view value);
  JsonWriter& Number(double value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // The document so far (complete once every Begin has its End).
  const std::string& str() const { return out_; }

  // `value` as a JSON string literal, quotes included.
  static std::string Quote(absl::string_view value);

 private:
  void BeforeValue();

  std::string out_;
  // One entry per open container: true once it holds an element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_JSON_WRITER_H_
