// The native builder: graph structure for real files, and clear errors for files it cannot build.
#include <gtest/gtest.h>

#include "require_file.h"

#include <filesystem>

#include "builder/build.h"
#include "gguf/writer.h"

namespace ggflow::builder {
namespace {

using frontend::GgmlOp;

const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";

int count(const frontend::GgmlGraph& g, GgmlOp op) {
  int n = 0;
  for (const auto& t : g.tensors()) n += t.leaf == frontend::LeafKind::none && t.op == op;
  return n;
}

TEST(Builder, Stories260KGraph) {
  auto f = gguf::File::open(kStories);
  ASSERT_TRUE(f) << f.error().str();
  auto m = build(*f);
  ASSERT_TRUE(m) << m.error().str();
  const auto& g = m->graph;
  EXPECT_EQ(m->hp.n_layer, 5);
  EXPECT_EQ(m->hp.n_head, 8);
  EXPECT_EQ(m->hp.n_head_kv, 4);
  EXPECT_EQ(m->hp.head_dim, 8);
  EXPECT_EQ(m->hp.n_vocab, 512);
  // inputs: 5 shared + 2 caches per layer, named by the contract
  std::vector<std::string> names;
  for (int id : g.inputs()) names.push_back(g.tensor(id).name);
  ASSERT_EQ(names.size(), 5u + 2 * 5);
  EXPECT_EQ(names[0], "inp_tokens");
  EXPECT_EQ(names[1], "inp_pos");
  EXPECT_EQ(names[2], "inp_out_ids");
  EXPECT_EQ(names[3], "self_kv_idxs");
  EXPECT_EQ(names[4], "self_kq_mask");
  EXPECT_EQ(names[5], "cache_k_l0");
  EXPECT_EQ(names[6], "cache_v_l0");
  EXPECT_EQ(g.tensor(g.inputs()[0]).type, gguf::GgmlType::I32);
  EXPECT_EQ(g.ne_str(g.tensor(g.inputs()[0]).ne), "[T, 1, 1, 1]");
  EXPECT_EQ(g.ne_str(g.tensor(g.inputs()[4]).ne), "[KV, T, 1, 1]");
  EXPECT_EQ(g.ne_str(g.tensor(g.inputs()[5]).ne), "[32, KV, 1, 1]");
  // outputs: logits [V, O] and the updated caches
  ASSERT_EQ(g.outputs().size(), 1u + 2 * 5);
  EXPECT_EQ(g.outputs().back().name, "logits");
  EXPECT_EQ(g.ne_str(g.tensor(g.outputs().back().id).ne), "[512, O, 1, 1]");
  EXPECT_EQ(g.outputs()[0].name, "cache_k_l0_out");
  EXPECT_EQ(count(g, GgmlOp::FLASH_ATTN_EXT), 5);
  EXPECT_EQ(count(g, GgmlOp::SET_ROWS), 10);
  EXPECT_EQ(count(g, GgmlOp::ROPE), 10);
  EXPECT_EQ(count(g, GgmlOp::GET_ROWS), 3);  // embedding + two row selections in the last layer
  EXPECT_EQ(count(g, GgmlOp::MUL_MAT), 5 * 7 + 1);
  // weights point into the mapped file
  const auto* w = g.find("blk.0.attn_q.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->leaf, frontend::LeafKind::weight);
  EXPECT_EQ(w->n_dims, 2);
  EXPECT_EQ(w->data.size(), 64u * 64 * 4);
  EXPECT_GE(w->data.data(), f->bytes()->span().data());
  EXPECT_TRUE(g.status().ok());
}

TEST(Builder, NonFlashAttentionGraph) {
  auto f = gguf::File::open(kStories);
  ASSERT_TRUE(f);
  auto m = build(*f, BuildOptions{.flash_attn = false});
  ASSERT_TRUE(m) << m.error().str();
  EXPECT_EQ(count(m->graph, GgmlOp::FLASH_ATTN_EXT), 0);
  EXPECT_EQ(count(m->graph, GgmlOp::SOFT_MAX), 5);
}

// A tiny llama-shaped file from the writer; `skip_key` / `skip_tensor` leave one thing out.
std::vector<uint8_t> tiny(const std::string& arch, const std::string& skip_key = {}, const std::string& skip_tensor = {}) {
  gguf::Writer w;
  w.set_str("general.architecture", arch);
  auto u32 = [&](const std::string& k, uint32_t v) { if (k != skip_key) w.set_u32(arch + "." + k, v); };
  u32("block_count", 1);
  u32("embedding_length", 8);
  u32("feed_forward_length", 16);
  u32("attention.head_count", 2);
  u32("attention.head_count_kv", 1);
  if (skip_key != "attention.layer_norm_rms_epsilon") w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  auto t = [&](const std::string& n, std::vector<uint64_t> ne) {
    if (n == skip_tensor) return;
    uint64_t k = 1;
    for (auto e : ne) k *= e;
    std::vector<float> v(k, 0.5f);
    (void)w.add_tensor_f32(n, ne, v);
  };
  t("token_embd.weight", {8, 32});
  t("output_norm.weight", {8});
  t("blk.0.attn_norm.weight", {8});
  t("blk.0.attn_q.weight", {8, 8});
  t("blk.0.attn_k.weight", {8, 4});
  t("blk.0.attn_v.weight", {8, 4});
  t("blk.0.attn_output.weight", {8, 8});
  t("blk.0.ffn_norm.weight", {8});
  t("blk.0.ffn_gate.weight", {8, 16});
  t("blk.0.ffn_up.weight", {8, 16});
  t("blk.0.ffn_down.weight", {16, 8});
  return w.to_bytes();
}

Result<BuiltModel> build_bytes(const std::vector<uint8_t>& b) {
  auto f = gguf::File::parse(b);
  if (!f) return f.error();
  return build(*f);
}

TEST(Builder, TinyLlamaBuilds) {
  auto m = build_bytes(tiny("llama"));
  ASSERT_TRUE(m) << m.error().str();
  EXPECT_EQ(m->hp.head_dim, 4);
}

TEST(Builder, UnsupportedArchitectureIsNamed) {
  auto m = build_bytes(tiny("mamba"));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().what.find("unsupported architecture 'mamba'"), std::string::npos) << m.error().str();
  EXPECT_NE(m.error().hint.find("llama, qwen2, qwen3, phi3, gemma2, gemma3, gemma4"), std::string::npos) << m.error().str();
}

TEST(Builder, MissingKeyIsNamed) {
  for (std::string key : {"block_count", "embedding_length", "feed_forward_length", "attention.head_count",
                          "attention.layer_norm_rms_epsilon"}) {
    auto m = build_bytes(tiny("llama", key));
    ASSERT_FALSE(m) << key;
    EXPECT_NE(m.error().what.find("missing required key 'llama." + key + "'"), std::string::npos) << m.error().str();
  }
}

TEST(Builder, MissingTensorIsNamed) {
  auto m = build_bytes(tiny("llama", {}, "blk.0.ffn_up.weight"));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().what.find("missing required tensor 'blk.0.ffn_up.weight'"), std::string::npos) << m.error().str();
  // qwen2 needs the Q/K/V biases the llama file does not have
  auto q = build_bytes(tiny("qwen2"));
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().what.find("'blk.0.attn_q.bias'"), std::string::npos) << q.error().str();
}

TEST(Builder, WrongTensorShapeIsNamed) {
  auto b = tiny("llama", {}, "blk.0.attn_k.weight");
  auto f = gguf::File::parse(b);
  ASSERT_TRUE(f);
  // the same file with a wrong-shaped attn_k (8 x 8 instead of 8 x 4)
  auto bytes = [&] {
    gguf::Writer x;
    x.set_str("general.architecture", "llama");
    x.set_u32("llama.block_count", 1);
    x.set_u32("llama.embedding_length", 8);
    x.set_u32("llama.feed_forward_length", 16);
    x.set_u32("llama.attention.head_count", 2);
    x.set_u32("llama.attention.head_count_kv", 1);
    x.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    for (const auto& t : f->tensors()) {
      std::vector<float> v(t.n_elements, 0.5f);
      (void)x.add_tensor_f32(std::string(t.name), t.ne, v);
    }
    std::vector<float> v(64, 0.5f);
    (void)x.add_tensor_f32("blk.0.attn_k.weight", {8, 8}, v);
    return x.to_bytes();
  }();
  auto m = build_bytes(bytes);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().what.find("tensor 'blk.0.attn_k.weight' has shape [8, 8]"), std::string::npos) << m.error().str();
}

// A tiny Gemma 4 as the real files lay it out: width 8, 2 query heads, full layers with head size 8
// and sliding ones with 4 (rotating 4), per-layer FFN widths and KV head counts (arrays), the
// last `shared` layers without K/V weights. `swa`: 1 per sliding layer.
struct TinyGemma4 {
  std::vector<uint8_t> swa = {1, 1, 0, 1, 0};
  uint32_t shared = 2;
  std::vector<int32_t> kv_heads = {1, 1, 1, 1, 1};
  bool rot_swa = true;  // write rope.dimension_count_swa
};
std::vector<uint8_t> tiny_gemma4(const TinyGemma4& o) {
  const uint64_t L = o.swa.size();
  gguf::Writer w;
  w.set_str("general.architecture", "gemma4");
  for (auto [k, v] : std::vector<std::pair<const char*, uint32_t>>{
           {"block_count", uint32_t(L)}, {"embedding_length", 8}, {"attention.head_count", 2}, {"attention.key_length", 8},
           {"attention.value_length", 8}, {"attention.key_length_swa", 4}, {"attention.value_length_swa", 4},
           {"attention.sliding_window", 16}, {"embedding_length_per_layer_input", 4}, {"attention.shared_kv_layers", o.shared}})
    w.set_u32(std::string("gemma4.") + k, v);
  if (o.rot_swa) w.set_u32("gemma4.rope.dimension_count_swa", 4);
  std::vector<int32_t> ff;
  for (uint64_t il = 0; il < L; ++il) ff.push_back(il + o.shared >= L ? 32 : 16);  // double-wide shared layers
  w.set_arr_i32("gemma4.feed_forward_length", ff);
  w.set_arr_i32("gemma4.attention.head_count_kv", o.kv_heads);
  w.set_arr_bool("gemma4.attention.sliding_window_pattern", o.swa);
  w.set_f32("gemma4.attention.layer_norm_rms_epsilon", 1e-6f);
  auto t = [&](const std::string& n, std::vector<uint64_t> ne) {
    uint64_t k = 1;
    for (auto e : ne) k *= e;
    (void)w.add_tensor_f32(n, ne, std::vector<float>(k, 0.25f));
  };
  t("token_embd.weight", {8, 32});
  t("output_norm.weight", {8});
  t("rope_freqs.weight", {4});
  t("per_layer_token_embd.weight", {4 * L, 32});
  t("per_layer_model_proj.weight", {8, 4 * L});
  t("per_layer_proj_norm.weight", {4});
  for (uint64_t il = 0; il < L; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const uint64_t D = o.swa[il] ? 4 : 8, Ekv = D * uint64_t(o.kv_heads[il]);
    t(p + "attn_norm.weight", {8});
    t(p + "attn_q.weight", {8, 2 * D});
    t(p + "attn_q_norm.weight", {D});
    if (il + o.shared < L) {  // a layer with its own cache; full layers take V from K
      t(p + "attn_k.weight", {8, Ekv});
      t(p + "attn_k_norm.weight", {D});
      if (o.swa[il]) t(p + "attn_v.weight", {8, Ekv});
    }
    t(p + "attn_output.weight", {2 * D, 8});
    t(p + "post_attention_norm.weight", {8});
    t(p + "ffn_norm.weight", {8});
    t(p + "ffn_gate.weight", {8, uint64_t(ff[il])});
    t(p + "ffn_up.weight", {8, uint64_t(ff[il])});
    t(p + "ffn_down.weight", {uint64_t(ff[il]), 8});
    t(p + "post_ffw_norm.weight", {8});
    t(p + "inp_gate.weight", {8, 4});
    t(p + "proj.weight", {4, 8});
    t(p + "post_norm.weight", {8});
  }
  return w.to_bytes();
}

TEST(Builder, Gemma4SharedKvLayersAndPerLayerArrays) {
  auto m = build_bytes(tiny_gemma4({}));
  ASSERT_TRUE(m) << m.error().str();
  const HParams& hp = m->hp;
  EXPECT_EQ(hp.n_layer_kv, 3);
  EXPECT_EQ(hp.kv_source(0), 0);
  EXPECT_EQ(hp.kv_source(3), 1);  // the last sliding layer with a cache
  EXPECT_EQ(hp.kv_source(4), 2);  // the last full one
  EXPECT_EQ(hp.dim(0), 4);
  EXPECT_EQ(hp.dim(2), 8);
  EXPECT_EQ(hp.ff(4), 32);
  EXPECT_EQ(hp.kv_elems_per_token(), 2 * (4 + 4 + 8));  // layers 0-2, one KV head each
  int caches = 0;
  for (const auto& t : m->graph.tensors()) caches += t.name.rfind("cache_k_l", 0) == 0 && t.leaf == frontend::LeafKind::input;
  EXPECT_EQ(caches, 3);
  EXPECT_EQ(count(m->graph, GgmlOp::FLASH_ATTN_EXT), 5);
}

TEST(Builder, Gemma4SharedKvPairingIsChecked) {
  TinyGemma4 o;
  o.swa = {1, 0, 1, 1, 0};  // the last two layers with a cache are full (1) then sliding (2): layer 3 would read layer 1
  auto m = build_bytes(tiny_gemma4(o));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().what.find("layer 3 shares layer 1's KV cache"), std::string::npos) << m.error().str();
  EXPECT_NE(m.error().what.find("slides while layer 1 does not"), std::string::npos) << m.error().str();

  o = TinyGemma4{};
  o.shared = 4;
  m = build_bytes(tiny_gemma4(o));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().what.find("leaves 1 of 5 layers with their own KV cache"), std::string::npos) << m.error().str();

  o = TinyGemma4{};
  o.kv_heads = {1, 1, 1, 2, 1};
  m = build_bytes(tiny_gemma4(o));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().what.find("has 2 KV heads, layer 1 1"), std::string::npos) << m.error().str();

  o = TinyGemma4{};
  o.rot_swa = false;  // the full layers' 8 rotary dimensions do not fit the sliding layers' heads of 4
  m = build_bytes(tiny_gemma4(o));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().what.find("the sliding layers rotate 8 dimensions"), std::string::npos) << m.error().str();
}

TEST(Builder, Gemma3LayersAndRopeBases) {
  std::string path = std::string(GGFLOW_ROOT) + "/models/gemma3-270m-q4_k_m.gguf";
  GGFLOW_REQUIRE_FILE(path, ::ggflow::testing::cat(path, " is missing (see models/*.missing)"));
  auto f = gguf::File::open(path);
  ASSERT_TRUE(f) << f.error().str();
  auto m = build(*f);
  ASSERT_TRUE(m) << m.error().str();
  const auto& hp = m->hp;
  EXPECT_EQ(hp.n_layer, 18);
  EXPECT_EQ(hp.head_dim, 256);
  EXPECT_EQ(hp.n_swa, 512);
  for (int il = 0; il < 18; ++il) EXPECT_EQ(hp.swa_layers[il], il % 6 != 5) << il;
  int global = 0, local = 0;
  for (const auto& t : m->graph.tensors())
    if (t.leaf == frontend::LeafKind::none && t.op == GgmlOp::ROPE) {
      float base = t.p<frontend::RopeParams>().freq_base;
      EXPECT_EQ(t.p<frontend::RopeParams>().mode, frontend::kRopeNeox);
      (base == 10000.0f ? local : global) += base == 10000.0f || base == 1000000.0f;
    }
  EXPECT_EQ(local, 2 * 15);
  EXPECT_EQ(global, 2 * 3);
  EXPECT_NE(m->graph.find("self_kq_mask_swa"), nullptr);
}


// BuildOptions::requant: every matrix but the LM head becomes Q4_0 (the bytes themselves are
// checked against the gguf package by python/check_dequant.py --to q4_0); norms stay f32.
TEST(Builder, RequantLeavesTheHeadAndTheNormsAlone) {
  struct Case {
    std::string file, head;
  };
  for (const Case& c : {Case{"gemma3-270m-q4_k_m.gguf", "token_embd.weight"},  // tied: the embedding is the head
                        Case{"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "output.weight"}}) {
    SCOPED_TRACE(c.file);
    const std::string path = std::string(GGFLOW_ROOT) + "/models/" + c.file;
    GGFLOW_REQUIRE_FILE(path, ::ggflow::testing::cat(path, " is missing (make models)"));
    auto f = gguf::File::open(path);
    ASSERT_TRUE(f) << f.error().str();
    auto m = build(*f, BuildOptions{.requant = gguf::GgmlType::Q4_0});
    ASSERT_TRUE(m) << m.error().str();
    int requantized = 0, kept = 0;
    for (const auto& t : m->graph.tensors()) {
      if (t.leaf != frontend::LeafKind::weight) continue;
      const gguf::TensorInfo* info = f->find_tensor(t.name);
      ASSERT_NE(info, nullptr) << t.name;
      if (t.n_dims == 1 || t.name == c.head) {
        EXPECT_EQ(t.type, info->type) << t.name;
        EXPECT_EQ(t.data.data(), f->tensor_data(*info).data()) << t.name << ": not the file's bytes";
        ++kept;
        continue;
      }
      EXPECT_EQ(t.type, gguf::GgmlType::Q4_0) << t.name;
      EXPECT_EQ(t.data.size(), info->n_elements / 32 * 18) << t.name;
      requantized += info->type != gguf::GgmlType::Q4_0;
    }
    EXPECT_GT(requantized, 100);
    EXPECT_GT(kept, 20);
  }
  // Only Q4_0 is offered.
  auto f = gguf::File::open(std::string(GGFLOW_ROOT) + "/models/gemma3-270m-q4_k_m.gguf");
  ASSERT_TRUE(f);
  auto bad = build(*f, BuildOptions{.requant = gguf::GgmlType::Q5_1});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().what.find("requantiz"), std::string::npos) << bad.error().str();
  EXPECT_NE(bad.error().hint.find("q4_0"), std::string::npos) << bad.error().str();
}

}  // namespace
}  // namespace ggflow::builder
