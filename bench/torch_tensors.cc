// See torch_tensors.h. The Pickler below mirrors the opcodes and memo
// numbering of CPython's pickler at protocol 2 for exactly the objects
// torch.save hands it (dicts, tensors reduced by _rebuild_tensor_v2,
// tuples of ints, strings, globals).
#include "bench/torch_tensors.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ckptfs::bench {
namespace {

class Pickler {
 public:
  Pickler() { out_.append("\x80\x02", 2); }  // PROTO 2

  std::string Finish() {
    out_.push_back('.');  // STOP
    return std::move(out_);
  }

  void Mark() { out_.push_back('('); }

  // Memoizes the object just pushed (BINPUT / LONG_BINPUT).
  int Put() {
    const int index = next_memo_++;
    if (index < 256) {
      out_.push_back('q');
      out_.push_back(static_cast<char>(index));
    } else {
      out_.push_back('r');
      AppendLe32(static_cast<uint32_t>(index));
    }
    return index;
  }

  void Get(int index) {
    if (index < 256) {
      out_.push_back('h');
      out_.push_back(static_cast<char>(index));
    } else {
      out_.push_back('j');
      AppendLe32(static_cast<uint32_t>(index));
    }
  }

  // A class or function (GLOBAL), memoized by its qualified name.
  void Global(absl::string_view module, absl::string_view name) {
    const std::string key = absl::StrCat(module, "\n", name);
    if (auto it = memo_.find(key); it != memo_.end()) return Get(it->second);
    out_.push_back('c');
    out_.append(key);
    out_.push_back('\n');
    memo_[key] = Put();
  }

  // A new string object (BINUNICODE), memoized.
  void FreshString(absl::string_view s) {
    out_.push_back('X');
    AppendLe32(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
    Put();
  }

  // A string constant that is the same object every time (e.g. 'storage').
  void ConstantString(absl::string_view s) {
    const std::string key = absl::StrCat("str:", s);
    if (auto it = memo_.find(key); it != memo_.end()) return Get(it->second);
    FreshString(s);
    memo_[key] = next_memo_ - 1;
  }

  void Int(int64_t v) {
    if (v >= 0 && v <= 0xFF) {
      out_.push_back('K');
      out_.push_back(static_cast<char>(v));
    } else if (v >= 0 && v <= 0xFFFF) {
      out_.push_back('M');
      out_.push_back(static_cast<char>(v & 0xFF));
      out_.push_back(static_cast<char>(v >> 8));
    } else if (v >= -0x80000000LL && v <= 0x7FFFFFFFLL) {
      out_.push_back('J');
      AppendLe32(static_cast<uint32_t>(v));
    } else {
      // LONG1: little-endian two's complement, (bit_length >> 3) + 1 bytes.
      const uint64_t u = static_cast<uint64_t>(v);  // only positive here
      int bits = 0;
      while (bits < 64 && (u >> bits) != 0) ++bits;
      const int n = (bits >> 3) + 1;
      out_.push_back('\x8a');
      out_.push_back(static_cast<char>(n));
      for (int i = 0; i < n; ++i) out_.push_back(i < 8 ? static_cast<char>(u >> (8 * i)) : 0);
    }
  }

  // A fresh tuple of ints, memoized (empty: EMPTY_TUPLE, not memoized).
  void IntTuple(const std::vector<int64_t>& items) {
    if (items.empty()) {
      out_.push_back(')');
      return;
    }
    if (items.size() > 3) Mark();
    for (int64_t item : items) Int(item);
    static const char kTupleN[] = {'\x85', '\x86', '\x87'};
    out_.push_back(items.size() > 3 ? 't' : kTupleN[items.size() - 1]);
    Put();
  }

  void Raw(char opcode) { out_.push_back(opcode); }

  // The tensor as Tensor.__reduce_ex__ gives it to the pickler in 1.13:
  // _rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict()).
  void Tensor(const TorchTensor& t) {
    Global("torch._utils", "_rebuild_tensor_v2");
    Mark();
    // The storage, as torch.save's persistent_id returns it.
    Mark();
    ConstantString("storage");
    Global("torch", StorageClass(t.dtype));
    FreshString(t.storage_key);
    ConstantString("cpu");
    Int(static_cast<int64_t>(t.nbytes / TorchDtypeSize(t.dtype)));
    Raw('t');
    Put();
    Raw('Q');  // BINPERSID
    Int(0);    // storage offset
    IntTuple(t.shape);
    std::vector<int64_t> stride(t.shape.size(), 1);
    for (size_t i = t.shape.size(); i-- > 1;) stride[i - 1] = stride[i] * t.shape[i];
    IntTuple(stride);
    Raw('\x89');  // requires_grad=False
    Global("collections", "OrderedDict");
    Raw(')');
    Raw('R');
    Put();
    Raw('t');
    Put();
    Raw('R');
    Put();
  }

 private:
  static absl::string_view StorageClass(TorchDtype dtype) {
    switch (dtype) {
      case TorchDtype::kUInt8:
        return "ByteStorage";
      case TorchDtype::kBFloat16:
        return "BFloat16Storage";
      case TorchDtype::kFloat32:
        return "FloatStorage";
    }
    return "ByteStorage";
  }

  void AppendLe32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
  }

  std::string out_;
  int next_memo_ = 0;
  std::map<std::string, int> memo_;
};

}  // namespace

absl::string_view TorchDtypeName(TorchDtype dtype) {
  switch (dtype) {
    case TorchDtype::kUInt8:
      return "torch.uint8";
    case TorchDtype::kBFloat16:
      return "torch.bfloat16";
    case TorchDtype::kFloat32:
      return "torch.float32";
  }
  return "?";
}

int TorchDtypeSize(TorchDtype dtype) {
  switch (dtype) {
    case TorchDtype::kUInt8:
      return 1;
    case TorchDtype::kBFloat16:
      return 2;
    case TorchDtype::kFloat32:
      return 4;
  }
  return 1;
}

std::vector<TorchTensor> RankTensors(uint64_t total_bytes, uint64_t tensor_bytes) {
  std::vector<TorchTensor> tensors;
  static constexpr TorchDtype kCycle[] = {TorchDtype::kBFloat16, TorchDtype::kFloat32,
                                          TorchDtype::kUInt8};
  for (uint64_t done = 0, i = 0; done < total_bytes; ++i) {
    TorchTensor t;
    t.nbytes = std::min(tensor_bytes, total_bytes - done);
    done += t.nbytes;
    t.dtype = kCycle[i % 3];
    while (t.nbytes % TorchDtypeSize(t.dtype) != 0) {
      t.dtype = t.dtype == TorchDtype::kFloat32 ? TorchDtype::kBFloat16 : TorchDtype::kUInt8;
    }
    const int64_t numel = static_cast<int64_t>(t.nbytes / TorchDtypeSize(t.dtype));
    if (numel > 1024 && numel % 1024 == 0) {
      t.shape = {numel / 1024, 1024};
    } else {
      t.shape = {numel};
    }
    t.name = absl::StrCat("layers.", i, ".weight");
    t.storage_key = absl::StrCat(i);
    tensors.push_back(std::move(t));
  }
  return tensors;
}

std::string PickleStateDict(const std::vector<TorchTensor>& tensors) {
  Pickler p;
  p.Raw('}');  // EMPTY_DICT
  p.Put();
  // The C pickler's batch_dict_exact: a dict of one item is SETITEM;
  // otherwise MARK ... SETITEMS batches of 1000, and a batch that came out
  // full is followed by another (possibly empty) one.
  if (tensors.size() == 1) {
    p.FreshString(tensors[0].name);
    p.Tensor(tensors[0]);
    p.Raw('s');
  } else {
    constexpr size_t kBatch = 1000;
    size_t next = 0;
    size_t in_batch = 0;
    do {
      p.Mark();
      in_batch = 0;
      while (next < tensors.size() && in_batch < kBatch) {
        p.FreshString(tensors[next].name);
        p.Tensor(tensors[next]);
        ++next;
        ++in_batch;
      }
      p.Raw('u');
    } while (in_batch == kBatch);
  }
  return p.Finish();
}

std::string PickleTensor(const TorchTensor& tensor) {
  TorchTensor lone = tensor;
  lone.storage_key = "0";
  Pickler p;
  p.Tensor(lone);
  return p.Finish();
}

}  // namespace ckptfs::bench
