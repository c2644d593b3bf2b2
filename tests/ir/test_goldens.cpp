// The evaluator against an independent oracle: numpy float64 and the gguf package's dequantizers
// (python/gen_ir_goldens.py -> tests/ir/golden/ir_ops.json).
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "helpers.h"

using namespace ggflow::ir;
using namespace ggflow::ir::testing;
using json = nlohmann::json;

namespace {
json load() {
  std::ifstream f(std::string(GGFLOW_ROOT) + "/tests/ir/golden/ir_ops.json");
  EXPECT_TRUE(f.good()) << "run python/gen_ir_goldens.py";
  return json::parse(f);
}
const json& find(const json& all, const std::string& name) {
  for (const json& c : all["cases"])
    if (c["name"] == name) return c;
  static json none;
  ADD_FAILURE() << "no golden case " << name;
  return none;
}
NodePtr tensor(const json& j) {
  std::vector<int64_t> shape = j["shape"].get<std::vector<int64_t>>();
  if (j["dtype"] == "f32") return ops::constant(Tensor::f32(shape, j["data"].get<std::vector<float>>()));
  return ops::constant(Tensor::i32(shape, j["data"].get<std::vector<int64_t>>()));
}
void expect_close(const NodePtr& out, const json& c) {
  Tensor y = eval0(out);
  const json& e = c["expected"];
  ASSERT_EQ(y.shape(), e["shape"].get<std::vector<int64_t>>()) << c["name"];
  std::vector<float> got = y.to_f32();
  std::vector<double> want = e["data"].get<std::vector<double>>();
  double atol = c["atol"].get<double>(), worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, atol) << c["name"].get<std::string>() << ": max abs error " << worst;
}
}  // namespace

TEST(Goldens, Rope) {
  json all = load();
  for (const char* name : {"rope_normal", "rope_neox_factors"}) {
    const json& c = find(all, name);
    const json& a = c["attrs"];
    RopeAttrs ra{a["mode"] == "neox" ? RopeMode::neox : RopeMode::normal, a["n_dims"].get<int64_t>(),
                 a["freq_base"].get<float>(), a["freq_scale"].get<float>(), a["attn_factor"].get<float>()};
    std::optional<Value> ff;
    if (c.contains("freq_factors")) ff = Value(tensor(c["freq_factors"]));
    expect_close(ops::rope(tensor(c["x"]), tensor(c["pos"]), ra, ff), c);
  }
}

TEST(Goldens, Sdpa) {
  json all = load();
  for (const char* name : {"sdpa_causal_gqa", "sdpa_mask"}) {
    const json& c = find(all, name);
    std::optional<Value> mask;
    if (c.contains("mask")) mask = Value(tensor(c["mask"]));
    expect_close(ops::sdpa(tensor(c["q"]), tensor(c["k"]), tensor(c["v"]), mask, c["attrs"]["causal"].get<bool>(),
                           c["attrs"]["scale"].get<float>()),
                 c);
  }
}

TEST(Goldens, NormsAndActivations) {
  json all = load();
  const json& r = find(all, "rms_norm");
  expect_close(ops::rms_norm(tensor(r["x"]), Value(tensor(r["gamma"])), r["attrs"]["eps"].get<float>()), r);
  const json& s = find(all, "softmax");
  expect_close(ops::softmax(tensor(s["x"]), -1), s);
  expect_close(ops::gelu(tensor(find(all, "gelu_erf")["x"]), GeluMode::erf), find(all, "gelu_erf"));
  expect_close(ops::gelu(tensor(find(all, "gelu_tanh")["x"]), GeluMode::tanh), find(all, "gelu_tanh"));
  expect_close(ops::swish(tensor(find(all, "swish")["x"])), find(all, "swish"));
}

TEST(Goldens, MatMulBlockWeights) {
  json all = load();
  for (const char* name : {"matmul_q4_k", "matmul_q5_0"}) {
    const json& c = find(all, name);
    std::string hex = c["w_hex"];
    auto bytes = std::make_shared<std::vector<uint8_t>>();
    for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes->push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    auto et = element_type_from_name(c["w_type"].get<std::string>());
    ASSERT_TRUE(et.has_value());
    auto w = Tensor::view(*et, c["w_shape"].get<std::vector<int64_t>>(), bytes, {bytes->data(), bytes->size()});
    ASSERT_TRUE(w.ok()) << w.error().str();
    expect_close(ops::matmul(tensor(c["x"]), ops::constant(*w), false, true), c);
  }
}
