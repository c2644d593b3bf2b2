// The architecture table: one entry per `general.architecture` the generic builder supports,
// each following llama.cpp's src/models/<arch>.cpp. To support another dense architecture, add
// its entry here (and, if it has a new kind of block, a branch in transformer.cpp); the README's
// table of families is printed from this one (`ggflow inspect --archs`).
#include <algorithm>

#include "builder/hparams.h"

namespace ggflow::builder {

namespace {

ArchTraits llama_traits() {  // llama.cpp src/models/llama.cpp
  ArchTraits t;
  t.name = "llama";
  t.models = "Llama 2, Llama 3.x, SmolLM2, Mistral 7B, TinyLlama";
  t.tested = "F32 (stories260K), Q4_1 (SmolLM2-135M), F16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K (synthetic Llama 3 and Mistral)";
  t.rope_freqs = true;
  t.swa = SwaKind::all;  // mistral: sliding_window (llama.cpp ignores the key; see docs/MODELS.md)
  t.keys = {"attention.sliding_window"};
  return t;
}
ArchTraits qwen2_traits() {  // src/models/qwen2.cpp
  ArchTraits t;
  t.name = "qwen2";
  t.models = "Qwen2, Qwen2.5, Qwen2.5-Coder";
  t.tested = "Q4_K_M (Qwen2.5-Coder-Instruct 0.5B: Q5_0, Q8_0, Q6_K, Q4_K; 1.5B: Q4_K, Q6_K), F16 (synthetic, "
             "Qwen2.5-0.5B shapes), F16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K (synthetic, small)";
  t.qkv_bias = true;
  t.rope_neox = true;
  return t;
}
ArchTraits qwen3_traits() {  // src/models/qwen3.cpp
  ArchTraits t;
  t.name = "qwen3";
  t.models = "Qwen3 (dense)";
  t.tested = "F16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K (synthetic)";
  t.qk_norm = true;
  t.rope_neox = true;
  return t;
}
ArchTraits phi3_traits() {  // src/models/phi3.cpp
  ArchTraits t;
  t.name = "phi3";
  t.models = "Phi-3, Phi-3.5, Phi-4-mini";
  t.tested = "F16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K (synthetic)";
  t.q_scale_in_graph = true;
  t.rope_neox = true;
  t.fused_qkv = true;
  t.fused_gate_up = true;
  t.rope_long_short = true;
  t.keys = {"attention.sliding_window"};  // read by llama.cpp and switched off (its PR 13676): so here
  return t;
}
ArchTraits gemma2_traits() {  // src/models/gemma2.cpp
  ArchTraits t;
  t.name = "gemma2";
  t.models = "Gemma 2";
  t.tested = "F16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K (synthetic)";
  t.sandwich_norms = true;
  t.embed_scale = true;
  t.q_scale_in_graph = true;
  t.rope_neox = true;
  t.softcap = true;
  t.ffn_act = FfnAct::gelu_tanh;
  t.swa = SwaKind::pattern;
  t.swa_pattern = 2;
  t.swa_default = 4096;
  t.keys = {"attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa",
            "attn_logit_softcapping", "final_logit_softcapping"};
  return t;
}
ArchTraits gemma3_traits() {  // src/models/gemma3.cpp
  ArchTraits t;
  t.name = "gemma3";
  t.models = "Gemma 3 (text)";
  t.tested = "Q4_K_M (Gemma 3 270M)";
  t.qk_norm = true;
  t.sandwich_norms = true;
  t.embed_scale = true;
  t.q_scale_in_graph = true;
  t.rope_neox = true;
  t.ffn_act = FfnAct::gelu_tanh;
  t.swa = SwaKind::pattern;
  t.swa_pattern = 6;
  t.rope_base_swa = 10000.0f;
  t.keys = {"attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa",
            "final_logit_softcapping"};
  return t;
}

ArchTraits gemma4_traits() {  // src/models/gemma4.cpp: the dense models (not the 26B mixture of experts)
  ArchTraits t;
  t.name = "gemma4";
  t.models = "Gemma 4 (dense, per-layer embeddings, shared KV layers)";
  t.tested = "F16, Q8_0, Q4_0, Q4_1, Q4_K and Q6_K (synthetic); F16 and Q8_0 with shared KV layers and per-layer arrays";
  t.qk_norm = true;
  t.v_norm = true;
  t.unit_attn_scale = true;
  t.sandwich_norms = true;
  t.embed_scale = true;
  t.rope_neox = true;
  t.rope_freqs_global = true;
  t.per_layer_embd = true;
  t.layer_out_scale = true;
  t.optional_v = true;
  t.ffn_act = FfnAct::gelu_tanh;
  t.swa = SwaKind::listed;
  t.keys = {"attention.sliding_window", "attention.sliding_window_pattern", "rope.freq_base_swa",
            "final_logit_softcapping", "embedding_length_per_layer_input", "attention.key_length_swa",
            "attention.value_length_swa", "rope.dimension_count_swa", "attention.shared_kv_layers"};
  return t;
}

}  // namespace

const std::vector<ArchTraits>& arch_table() {
  static const std::vector<ArchTraits> t{llama_traits(), qwen2_traits(), qwen3_traits(),
                                         phi3_traits(),  gemma2_traits(), gemma3_traits(),
                                         gemma4_traits()};
  return t;
}

const ArchTraits* find_arch(std::string_view name) {
  for (const auto& t : arch_table())
    if (t.name == name) return &t;
  return nullptr;
}

std::string supported_archs() {
  std::string s;
  for (const auto& t : arch_table()) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

const std::vector<std::string>& common_keys() {
  static const std::vector<std::string> k{
      // read by read_hparams
      "block_count", "embedding_length", "feed_forward_length", "attention.head_count",
      "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "attention.key_length",
      "attention.value_length", "rope.dimension_count", "context_length", "rope.freq_base",
      "rope.scaling.type", "rope.scaling.factor", "rope.scaling.original_context_length",
      "rope.scaling.attn_factor", "vocab_size",
      // informational: they do not change the graph
      "rope.scaling.finetuned", "tensor_data_layout"};
  return k;
}

std::string unknown_key(const gguf::File& f, const ArchTraits& arch) {
  const std::string p = arch.name + ".";
  const auto& common = common_keys();
  for (const auto& kv : f.metadata()) {
    std::string_view key = kv.key;
    if (key.substr(0, p.size()) != p) continue;
    std::string rest(key.substr(p.size()));
    if (std::find(common.begin(), common.end(), rest) != common.end()) continue;
    if (std::find(arch.keys.begin(), arch.keys.end(), rest) != arch.keys.end()) continue;
    return std::string(key);
  }
  return {};
}

std::string architectures_markdown() {
  std::string s =
      "| architecture | model families | what the builder adds | weight types tested against llama.cpp |\n"
      "|---|---|---|---|\n";
  for (const auto& t : arch_table()) {
    std::vector<std::string> f;
    if (t.qkv_bias) f.push_back("Q/K/V bias");
    if (t.qk_norm) f.push_back("Q/K RMS norm per head");
    if (t.fused_qkv) f.push_back("fused QKV");
    if (t.fused_gate_up) f.push_back("fused gate/up");
    if (t.rope_neox) f.push_back("NeoX RoPE");
    if (t.rope_freqs) f.push_back("RoPE frequency factors (Llama 3)");
    if (t.rope_long_short) f.push_back("LongRoPE factors, partial rotary");
    if (t.q_scale_in_graph) f.push_back("Q scaled before attention");
    if (t.embed_scale) f.push_back("embeddings × √E");
    if (t.sandwich_norms) f.push_back("sandwich norms");
    if (t.softcap) f.push_back("attention and final logit soft-capping");
    if (t.v_norm) f.push_back("V RMS norm per head, attention scale 1");
    if (t.rope_freqs_global) f.push_back("RoPE frequency factors on full-attention layers");
    if (t.per_layer_embd) f.push_back("per-layer token embeddings");
    if (t.optional_v)
      f.push_back("sliding layers' own head size, layers sharing an earlier layer's KV cache, V from K without attn_v");
    if (t.swa == SwaKind::all) f.push_back("sliding window where the file sets one");
    if (t.swa == SwaKind::listed) f.push_back("sliding window on the layers the file lists");
    if (t.swa == SwaKind::pattern)
      f.push_back("sliding window on " + std::to_string(t.swa_pattern - 1) + " of " + std::to_string(t.swa_pattern) + " layers");
    f.push_back(t.ffn_act == FfnAct::silu ? "SwiGLU" : "GeGLU");
    std::string feats;
    for (const auto& x : f) feats += (feats.empty() ? "" : ", ") + x;
    s += "| `" + t.name + "` | " + t.models + " | " + feats + " | " + t.tested + " |\n";
  }
  s += "\nEvery architecture computes with weights in " + weight_types() + ".\n";
  return s;
}

std::string weight_types() { return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K–Q6_K"; }

}  // namespace ggflow::builder
