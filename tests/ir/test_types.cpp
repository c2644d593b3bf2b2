#include <gtest/gtest.h>

#include "ir/dim.h"
#include "ir/element_type.h"
#include "ir/tensor.h"

using namespace ggflow::ir;

TEST(ElementTypes, NamesSizesAndGgmlMapping) {
  EXPECT_EQ(to_string(ElementType::f32), "f32");
  EXPECT_EQ(to_string(ElementType::q4_k), "q4_k");
  EXPECT_EQ(element_type_from_name("bool"), ElementType::boolean);
  EXPECT_EQ(scalar_size(ElementType::bf16), 2u);
  EXPECT_TRUE(is_block(ElementType::q4_0));
  EXPECT_FALSE(is_block(ElementType::f16));
  EXPECT_EQ(block_size(ElementType::q4_k), 256);
  EXPECT_EQ(byte_size(ElementType::q4_0, 64), 36u);  // 2 blocks of (f16 d + 16 bytes)
  EXPECT_EQ(byte_size(ElementType::q8_0, 32), 34u);
  EXPECT_EQ(from_ggml(ggflow::gguf::GgmlType::Q6_K), ElementType::q6_k);
  EXPECT_EQ(to_ggml(ElementType::q5_1), ggflow::gguf::GgmlType::Q5_1);
  EXPECT_FALSE(to_ggml(ElementType::boolean).has_value());
}

TEST(Dims, SymbolsDecideEquality) {
  Symbol t = Symbol::named("T"), t2 = Symbol::named("T");
  EXPECT_EQ(Dim(t), Dim(t));
  EXPECT_FALSE(Dim(t) == Dim(t2));  // same display name, different length
  EXPECT_EQ(Dim(4), Dim(int64_t{4}));
  EXPECT_FALSE(Dim(4) == Dim(t));
  Shape s{1, t, 576};
  EXPECT_EQ(s.str(), "[1,?T,576]");
  EXPECT_FALSE(s.is_static());
  EXPECT_EQ(Shape::dynamic_rank().str(), "[...]");
  EXPECT_TRUE(Shape::from({2, 3}).is_static());
  EXPECT_TRUE(Dim::dynamic().symbol().valid());
  EXPECT_NE(Dim::dynamic().symbol(), Dim::dynamic().symbol());
}

TEST(Tensors, ConvertAndView) {
  Tensor t = Tensor::f32({2, 2}, {1.5f, -2.0f, 3.25f, 0.0f});
  EXPECT_EQ(t.numel(), 4);
  EXPECT_EQ(t.to_f32()[2], 3.25f);
  EXPECT_EQ(t.to_i64()[1], -2);
  Tensor h = Tensor::from_f32(ElementType::f16, {2}, std::vector<float>{1.0f / 3.0f, 65504.0f});
  EXPECT_EQ(h.nbytes(), 4u);
  EXPECT_NEAR(h.to_f32()[0], 1.0f / 3.0f, 1e-3);
  EXPECT_EQ(h.to_f32()[1], 65504.0f);
  auto owner = std::make_shared<std::vector<uint8_t>>(34, 0);
  auto v = Tensor::view(ElementType::q8_0, {1, 32}, owner, {owner->data(), owner->size()});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->bytes(), owner->data());  // zero-copy
  EXPECT_EQ(owner.use_count(), 2);       // the view keeps the bytes alive
  auto bad = Tensor::view(ElementType::q8_0, {1, 32}, owner, {owner->data(), 33});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what.find("needs 34 bytes"), std::string::npos);
  auto badk = Tensor::view(ElementType::q8_0, {2, 16}, owner, {owner->data(), 34});
  EXPECT_FALSE(badk.ok());
}
