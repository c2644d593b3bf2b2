// Weight constants from a GGUF file: zero-copy views that keep the mapping alive, and MatMul /
// Gather over them.
#include <cstring>

#include "gguf/dequant.h"
#include "gguf/file.h"
#include "gguf/writer.h"
#include "helpers.h"
#include "ir/gguf_constant.h"

using namespace ggflow;
using namespace ggflow::ir;
using namespace ggflow::ir::testing;

TEST(GgufConstant, ZeroCopyQ8_0WeightOutlivesTheFile) {
  // W: ne = [32, 2] (K = 32 innermost, N = 2 rows) in Q8_0; row n, element k = 0.5 * (k - 16 * n)
  std::vector<uint8_t> data;
  for (int n = 0; n < 2; ++n) {
    uint16_t d = gguf::f32_to_f16(0.5f);
    data.push_back(d & 0xff);
    data.push_back(d >> 8);
    for (int k = 0; k < 32; ++k) data.push_back(static_cast<uint8_t>(static_cast<int8_t>(k - 16 * n)));
  }
  gguf::Writer w;
  w.set_str("general.architecture", "test");
  ASSERT_TRUE(w.add_tensor("blk.0.w", gguf::GgmlType::Q8_0, {32, 2}, data).ok());
  ASSERT_TRUE(w.add_tensor("bad", gguf::GgmlType::IQ2_XXS, {256}, std::vector<uint8_t>(66)).ok());
  auto bytes = w.to_bytes();
  NodePtr c;
  {
    auto f = gguf::File::parse(bytes);
    ASSERT_TRUE(f.ok()) << f.error().str();
    auto r = gguf_constant(*f, *f->find_tensor("blk.0.w"));
    ASSERT_TRUE(r.ok()) << r.error().str();
    c = *r;
    const Tensor& t = c->attrs<ConstantAttrs>().value;
    auto span = f->bytes()->span();
    EXPECT_GE(t.bytes(), span.data());  // a view into the file's bytes
    EXPECT_LT(t.bytes(), span.data() + span.size());
    auto bad = gguf_constant(*f, *f->find_tensor("bad"));
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().what.find("IQ2_XXS"), std::string::npos);
  }  // the File is gone; the constant keeps the bytes
  EXPECT_EQ(sig(c), "q8_0[2,32]");
  EXPECT_EQ(c->name(), "blk.0.w");
  auto x = ops::const_f32(std::vector<float>(32, 1.0f), std::vector<int64_t>{1, 32});
  // row 0: 0.5 * sum(k) = 248; row 1: 0.5 * sum(k - 16) = -8
  EXPECT_EQ(f32s(eval0(ops::matmul(x, c, false, true))), (std::vector<float>{248, -8}));
  EXPECT_EQ(f32s(eval0(ops::gather(c, ops::const_i32({1}), 0)))[0], -8.0f);
}
