// Tests of the tensor list and the pickles (pure C++; the Python checks are
// in torch_load_test.cc).
#include "bench/torch_tensors.h"

#include <string>

#include "gtest/gtest.h"

namespace ckptfs::bench {
namespace {

TEST(RankTensors, CutsTheBytesIntoStorages) {
  const std::vector<TorchTensor> t = RankTensors((3 << 20) + 7, 1 << 20);
  ASSERT_EQ(t.size(), 4u);
  uint64_t total = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    total += t[i].nbytes;
    int64_t numel = 1;
    for (int64_t d : t[i].shape) numel *= d;
    EXPECT_EQ(static_cast<uint64_t>(numel) * TorchDtypeSize(t[i].dtype), t[i].nbytes);
    EXPECT_EQ(t[i].storage_key, std::to_string(i));
    EXPECT_EQ(t[i].name, "layers." + std::to_string(i) + ".weight");
  }
  EXPECT_EQ(total, (3u << 20) + 7);
  EXPECT_EQ(t[0].dtype, TorchDtype::kBFloat16);
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{512, 1024}));
  EXPECT_EQ(t[1].dtype, TorchDtype::kFloat32);
  EXPECT_EQ(t[2].dtype, TorchDtype::kUInt8);
  EXPECT_EQ(t[3].nbytes, 7u);  // odd: bytes
  EXPECT_EQ(t[3].dtype, TorchDtype::kUInt8);
  EXPECT_EQ(t[3].shape, (std::vector<int64_t>{7}));
}

TEST(Pickle, LoneTensorMatchesPython) {
  // data.pkl of torch.save(torch.zeros(2, 2, dtype=torch.bfloat16), buf) by
  // torch 1.13 (memo numbers, opcodes, the storage tuple).
  TorchTensor t;
  t.dtype = TorchDtype::kBFloat16;
  t.shape = {2, 2};
  t.nbytes = 8;
  t.storage_key = "5";  // a lone tensor's storage is always "0"
  const std::string expected = std::string(
      "\x80\x02"
      "ctorch._utils\n_rebuild_tensor_v2\nq\x00((X\x07\x00\x00\x00storageq"
      "\x01"
      "ctorch\nBFloat16Storage\nq\x02X\x01\x00\x00\x00"
      "0q\x03X\x03\x00\x00\x00"
      "cpuq\x04K\x04tq\x05QK\x00K\x02K\x02\x86q\x06K\x02K\x01\x86q\x07\x89"
      "ccollections\nOrderedDict\nq\x08)Rq\ttq\nRq\x0b.",
      157);
  EXPECT_EQ(PickleTensor(t), expected);
}

TEST(Pickle, LargeDictsUseLongMemoAndBatches) {
  const std::vector<TorchTensor> one = RankTensors(100, 100);
  const std::string p1 = PickleStateDict(one);
  EXPECT_EQ(p1.substr(p1.size() - 2), "s.");  // one item: SETITEM
  const std::vector<TorchTensor> many = RankTensors(1000 * 8, 8);
  const std::string p = PickleStateDict(many);
  EXPECT_EQ(p.substr(p.size() - 4), "u(u.");  // a full batch, then an empty one
  EXPECT_NE(p.find('r'), std::string::npos);  // LONG_BINPUT beyond memo 255
  const std::string p1001 = PickleStateDict(RankTensors(1001 * 8, 8));
  EXPECT_EQ(p1001.substr(p1001.size() - 2), "u.");
  EXPECT_NE(p1001.substr(p1001.size() - 4), "u(u.");
}

}  // namespace
}  // namespace ckptfs::bench
