// write_seeds DIR: the generated part of the fuzzers' seed corpora (scripts/fuzz.sh runs it; the
// hand-written part is committed under fuzz/seeds/<target>/).
//   DIR/gguf/            for fuzz_gguf and fuzz_gguf_graph: tiny models the builder accepts (every
//                        architecture; llama with a SentencePiece vocabulary, qwen2 with byte-level BPE, gemma3 with
//                        WordPiece), each with a chat template, so mutations start from files
//                        that reach the graph builder, the tokenizer reader and the template
//                        parser; and the llama one with each hyper-parameter at an extreme value
//   DIR/fuzz_tokenizer/  every line of the shared vocabularies' .inp test files, once per
//                        tokenizer (the first byte picks it, as fuzz_tokenizer.cpp reads it)
//   DIR/fuzz_jinja/      every shared chat template with one of the template tests' conversations
//                        (template, a NUL byte, the conversation as JSON)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "gguf/writer.h"
#include "text/unicode.h"

namespace fs = std::filesystem;
using ggflow::gguf::Writer;

namespace {

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// One hyper-parameter of a tiny model set to an extreme value (the malformed-model seeds).
struct Override {
  std::string key;  // after "<arch>."
  uint32_t value;
};

// The transformer tensors of one layer of width 8 (2 heads of 4, 1 KV head), for `arch`.
void add_weights(Writer& w, const std::string& arch, uint64_t n_vocab, const Override& o = {}) {
  w.set_str("general.architecture", arch);
  std::vector<std::pair<std::string, uint32_t>> u32 = {
      {"block_count", 1}, {"embedding_length", 8}, {"feed_forward_length", 16}, {"attention.head_count", 2},
      {"attention.head_count_kv", 1}, {"context_length", 64}};
  if (arch == "gemma3" || arch == "gemma2" || arch == "gemma4") u32.push_back({"attention.sliding_window", 16});
  if (arch == "gemma4")
    for (const char* k : {"embedding_length_per_layer_input", "attention.key_length_swa", "attention.value_length_swa"})
      u32.push_back({k, 4});
  if (!o.key.empty()) {
    bool replaced = false;
    for (auto& [k, v] : u32)
      if (k == o.key) v = o.value, replaced = true;
    if (!replaced) u32.push_back({o.key, o.value});
  }
  for (const auto& [k, v] : u32) w.set_u32(arch + "." + k, v);
  w.set_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  uint32_t state = 1;
  auto t = [&](const std::string& n, std::vector<uint64_t> ne) {
    uint64_t k = 1;
    for (auto e : ne) k *= e;
    std::vector<float> v(k);
    for (float& x : v) x = float(int((state = state * 1664525u + 1013904223u) >> 24) - 128) / 256.0f;
    (void)w.add_tensor_f32(n, ne, v);
  };
  const bool fused = arch == "phi3";
  t("token_embd.weight", {8, n_vocab});
  t("output_norm.weight", {8});
  t("blk.0.attn_norm.weight", {8});
  if (fused) {  // phi3: fused QKV and gate/up, LongRoPE factors
    t("blk.0.attn_qkv.weight", {8, 16});
    t("blk.0.ffn_up.weight", {8, 32});
    t("rope_factors_long.weight", {2});
    t("rope_factors_short.weight", {2});
  } else {
    t("blk.0.attn_q.weight", {8, 8});
    t("blk.0.attn_k.weight", {8, 4});
    t("blk.0.attn_v.weight", {8, 4});
    t("blk.0.ffn_gate.weight", {8, 16});
    t("blk.0.ffn_up.weight", {8, 16});
  }
  t("blk.0.attn_output.weight", {8, 8});
  t("blk.0.ffn_norm.weight", {8});
  t("blk.0.ffn_down.weight", {16, 8});
  if (arch == "qwen2") {
    t("blk.0.attn_q.bias", {8});
    t("blk.0.attn_k.bias", {4});
    t("blk.0.attn_v.bias", {4});
  }
  if (arch == "gemma3" || arch == "qwen3" || arch == "gemma4") {
    t("blk.0.attn_q_norm.weight", {4});
    t("blk.0.attn_k_norm.weight", {4});
  }
  if (arch == "gemma2" || arch == "gemma3" || arch == "gemma4") {
    t("blk.0.post_attention_norm.weight", {8});
    t("blk.0.post_ffw_norm.weight", {8});
  }
  if (arch == "gemma4") {  // per-layer embeddings (width 4), one full-attention layer with rope_freqs
    w.set_arr_bool("gemma4.attention.sliding_window_pattern", {0});
    t("rope_freqs.weight", {2});
    t("per_layer_token_embd.weight", {4, n_vocab});
    t("per_layer_model_proj.weight", {8, 4});
    t("per_layer_proj_norm.weight", {4});
    t("blk.0.inp_gate.weight", {8, 4});
    t("blk.0.proj.weight", {4, 8});
    t("blk.0.post_norm.weight", {8});
    t("blk.0.layer_output_scale.weight", {1});
  }
  if (arch == "llama" && o.key == "attention.sliding_window") t("rope_freqs.weight", {2});  // llama 3 + mistral
}

const char* kChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
const char* kLlama2 =
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] | trim + ' [/INST]' }}"
    "{% elif m['role'] == 'system' %}{{ '<<SYS>>\\n' + m['content'] + '\\n<</SYS>>\\n\\n' }}"
    "{% else %}{{ ' ' + m['content'] + eos_token }}{% endif %}{% endfor %}";
const char* kGemma =
    "{% for m in messages %}{% set role = 'model' if m.role == 'assistant' else m.role %}"
    "{{ '<start_of_turn>' ~ role ~ '\n' ~ (m.content | trim) ~ '<end_of_turn>\n' }}{% endfor %}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}";

// llama + SentencePiece: control tokens, the 256 byte-fallback tokens, a few scored pieces.
std::string tiny_llama_spm(const Override& o = {}, const std::string& arch = "llama") {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  for (const char* p : {"\xE2\x96\x81", "\xE2\x96\x81h", "\xE2\x96\x81hi", "e", "l", "o", "\xE2\x96\x81he", "ll",
                        "\xE2\x96\x81hello", "[INST]", "[/INST]"}) {
    tokens.push_back(p);
    types.push_back(1);
  }
  std::vector<float> scores;
  for (size_t i = 0; i < tokens.size(); ++i) scores.push_back(-float(i));
  Writer w;
  add_weights(w, arch, tokens.size(), o);
  w.set_str("tokenizer.ggml.model", "llama");
  w.set_arr_str("tokenizer.ggml.tokens", tokens);
  w.set_arr_f32("tokenizer.ggml.scores", scores);
  w.set_arr_i32("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_str("tokenizer.chat_template", kLlama2);
  auto b = w.to_bytes();
  return {b.begin(), b.end()};
}

// qwen2 + byte-level BPE: the 256-character byte alphabet, a few merges, ChatML specials.
std::string tiny_qwen2_bpe() {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (const auto& c : ggflow::text::byte_to_unicode()) {
    tokens.push_back(c);
    types.push_back(1);
  }
  const std::vector<std::string> merges = {"\xC4\xA0 h", "\xC4\xA0h i", "h e", "l l", "he ll", "hell o", "\xC4\xA0 t"};
  for (const auto& m : merges) {
    tokens.push_back(m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1));
    types.push_back(1);
  }
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    tokens.push_back(s);
    types.push_back(3);
  }
  Writer w;
  add_weights(w, "qwen2", tokens.size());
  w.set_str("tokenizer.ggml.model", "gpt2");
  w.set_str("tokenizer.ggml.pre", "qwen2");
  w.set_arr_str("tokenizer.ggml.tokens", tokens);
  w.set_arr_i32("tokenizer.ggml.token_type", types);
  w.set_arr_str("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.eos_token_id", uint32_t(tokens.size() - 3));
  w.set_u32("tokenizer.ggml.bos_token_id", uint32_t(tokens.size() - 3));
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_str("tokenizer.chat_template", kChatMl);
  auto b = w.to_bytes();
  return {b.begin(), b.end()};
}

// gemma3 + WordPiece: [PAD] [UNK] [CLS] [SEP] [MASK], letters and a few word pieces.
std::string tiny_gemma3_wpm() {
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::vector<int32_t> types = {3, 2, 3, 3, 3};
  for (char c = 'a'; c <= 'z'; ++c) tokens.push_back(std::string(1, c));
  for (const char* p : {"hello", "##s", "##ing", "un", "##aff", "##able", ",", ".", "?", "!"}) tokens.push_back(p);
  types.resize(tokens.size(), 1);
  Writer w;
  add_weights(w, "gemma3", tokens.size());
  w.set_str("tokenizer.ggml.model", "bert");
  w.set_str("tokenizer.ggml.pre", "jina-v2-en");
  w.set_arr_str("tokenizer.ggml.tokens", tokens);
  w.set_arr_i32("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.padding_token_id", 0);
  w.set_u32("tokenizer.ggml.unknown_token_id", 1);
  w.set_u32("tokenizer.ggml.cls_token_id", 2);
  w.set_u32("tokenizer.ggml.seperator_token_id", 3);
  w.set_str("tokenizer.chat_template", kGemma);
  auto b = w.to_bytes();
  return {b.begin(), b.end()};
}

// Strings separated by a line "__ggml_vocab_test__" (the .inp format of the shared vocabularies).
std::vector<std::string> split_inp(const std::string& all) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < all.size()) {
    size_t hit = all.find(sep, pos);
    if (hit == std::string::npos) hit = all.size();
    out.push_back(all.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  const fs::path root = GGFLOW_ROOT;
  for (const char* t : {"gguf", "fuzz_tokenizer", "fuzz_jinja"}) fs::create_directories(dir / t);

  write_file(dir / "gguf" / "tiny-llama-spm.gguf", tiny_llama_spm());
  write_file(dir / "gguf" / "tiny-qwen2-bpe.gguf", tiny_qwen2_bpe());
  write_file(dir / "gguf" / "tiny-gemma3-wpm.gguf", tiny_gemma3_wpm());
  // The other families (builder/arch.cpp) on the SentencePiece vocabulary, and a llama 3 +
  // mistral one (rope_freqs, a sliding window on every layer).
  const char* families[] = {"qwen3", "phi3", "gemma2", "gemma4"};
  for (const char* a : families) write_file(dir / "gguf" / ("tiny-" + std::string(a) + "-spm.gguf"), tiny_llama_spm({}, a));
  write_file(dir / "gguf" / "tiny-llama3-mistral-spm.gguf", tiny_llama_spm({"attention.sliding_window", 4}));
  // The tiny llama with one hyper-parameter at an extreme (zero, huge, inconsistent with the
  // tensors): the builder must refuse each with an error, never allocate or loop by it.
  const Override extremes[] = {
      {"block_count", 0}, {"block_count", 0xFFFFFFFF}, {"embedding_length", 0}, {"embedding_length", 0xFFFFFFFF},
      {"feed_forward_length", 0}, {"attention.head_count", 0}, {"attention.head_count", 3},
      {"attention.head_count", 0x80000000}, {"attention.head_count_kv", 0}, {"attention.head_count_kv", 4},
      {"attention.key_length", 0}, {"attention.key_length", 0x40000000}, {"rope.dimension_count", 1000},
      {"rope.dimension_count", 3}, {"context_length", 0xFFFFFFFF}, {"context_length", 0}};
  for (const auto& o : extremes)
    write_file(dir / "gguf" / ("tiny-llama-" + o.key + "-" + std::to_string(o.value) + ".gguf"), tiny_llama_spm(o));

  // Tokenizer: selector byte (fuzz_tokenizer.cpp: byte % 8 = tokenizer x mode) + each test line.
  const auto& vocabs = ggflow::fuzz::tokenizer_vocabs();
  int n_tok = 0;
  for (size_t v = 0; v < vocabs.size(); ++v) {
    const fs::path inp = root / vocabs[v] += ".inp";
    int line = 0;
    for (const auto& s : split_inp(read_file(inp))) {
      if (s.size() > 4000) continue;
      write_file(dir / "fuzz_tokenizer" / (std::to_string(v) + "-" + std::to_string(line++)), std::string(1, char(v)) + s);
      ++n_tok;
    }
  }

  // Templates: each shared template with one of the template tests' conversations, in turn.
  nlohmann::ordered_json cases = nlohmann::ordered_json::parse(read_file(root / "tests/text/data/templates/cases.json"), nullptr, false);
  if (!cases.is_array() || cases.empty()) cases = nlohmann::ordered_json::array({{{"messages", {{{"role", "user"}, {"content", "hi"}}}}}});
  std::vector<fs::path> templates;
  for (const auto& e : fs::directory_iterator(root / "../shared/data/chat-templates"))
    if (e.path().extension() == ".jinja") templates.push_back(e.path());
  std::sort(templates.begin(), templates.end());
  for (size_t i = 0; i < templates.size(); ++i) {
    const std::string src = read_file(templates[i]);
    if (src.size() > 30000) continue;
    auto c = cases[i % cases.size()];
    c.erase("name");
    write_file(dir / "fuzz_jinja" / templates[i].stem(), src + std::string(1, '\0') + c.dump());
  }
  std::printf("write_seeds: %zu tiny models, %d tokenizer lines, %zu templates\n", 4 + std::size(families) + std::size(extremes), n_tok,
              templates.size());
  return 0;
}
