#include "corpus.h"

#include <cstring>

#include "gguf/writer.h"

namespace ggflow::testing {

namespace {

// Builds GGUF bytes field by field, so a test can put any value in any field.
struct B {
  std::vector<uint8_t> v;
  template <class T> B& put(T x) { auto p = reinterpret_cast<const uint8_t*>(&x); v.insert(v.end(), p, p + sizeof(T)); return *this; }
  B& u32(uint32_t x) { return put(x); }
  B& u64(uint64_t x) { return put(x); }
  B& str(const std::string& s) { u64(s.size()); v.insert(v.end(), s.begin(), s.end()); return *this; }
  B& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    v.insert(v.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  B& kv_u32(const std::string& k, uint32_t x) { return str(k).u32(4).u32(x); }
  // tensor info: name, dims (GGML order), type, offset
  B& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (auto d : ne) u64(d);
    return u32(type).u64(offset);
  }
  B& pad_to(size_t align) { v.resize((v.size() + align - 1) / align * align, 0); return *this; }
  B& zeros(size_t n) { v.resize(v.size() + n, 0); return *this; }
};

constexpr uint32_t F32 = 0, Q4_0 = 2;

}  // namespace

std::vector<MalformedCase> malformed_corpus() {
  std::vector<MalformedCase> c;
  auto add = [&](std::string name, std::string cls, B b, std::string must) {
    c.push_back({std::move(name), std::move(cls), std::move(b.v), std::move(must)});
  };
  // CVE-2024-21836: n_tensors so large that n_tensors * sizeof(info) overflows an allocation.
  add("cve-2024-21836-n-tensors", "CVE-2024-21836", B().header(0x0800000000000001ull, 0), "n_tensors");
  // CVE-2024-23605: n_kv so large that the key/value array allocation overflows.
  add("cve-2024-23605-n-kv", "CVE-2024-23605", B().header(0, 0xFFFFFFFFFFFFFFFFull), "n_kv");
  // CVE-2024-23496: a string length of 2^64-1 (len + 1 wraps to 0 in a naive reader).
  add("cve-2024-23496-string-length", "CVE-2024-23496", B().header(0, 1).u64(0xFFFFFFFFFFFFFFFFull).zeros(64), "length");
  // CVE-2024-21825: an array of strings whose count overflows count * sizeof(string).
  add("cve-2024-21825-string-array", "CVE-2024-21825",
      B().header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(0x2000000000000000ull).str("a"), "length");
  // CVE-2024-21802: n_dims beyond GGML_MAX_DIMS writes past the fixed ne[4] array.
  add("cve-2024-21802-n-dims", "CVE-2024-21802",
      B().header(1, 0).str("t").u32(200).u64(1).u64(1).u64(1).u64(1).u64(1).u32(F32).u64(0), "n_dims");
  // CVE-2025-53630: offset + size wraps around 2^64 and passes a naive "end <= file size" check.
  add("cve-2025-53630-offset-wrap", "CVE-2025-53630",
      B().header(1, 0).tensor("t", {32}, F32, 0xFFFFFFFFFFFFFFE0ull).pad_to(32).zeros(128), "past the end");
  // CVE-2026-27940: a second overflow of the total data size (bypass of the 2025-53630 fix): two
  // tensors whose sizes add up past 2^64; each must be checked against the real file size.
  add("cve-2026-27940-total-size", "CVE-2026-27940",
      B().header(2, 0).tensor("a", {0x1000000000000000ull, 8}, Q4_0 + 6 /*Q8_0*/, 0)
          .tensor("b", {0x1000000000000000ull, 8}, Q4_0 + 6, 0).pad_to(32).zeros(64), "");
  // CVE-2026-33298: ne product * type size overflows, so a tiny buffer backs an exabyte tensor.
  add("cve-2026-33298-ne-product", "CVE-2026-33298",
      B().header(1, 0).tensor("t", {0x100000000ull, 0x100000000ull, 0x100000000ull}, F32, 0).pad_to(32).zeros(64),
      "overflows");
  // Other limits.
  add("bad-magic", "magic", B().u32(0x46554746).u32(3).u64(0).u64(0), "magic");
  add("empty-file", "magic", B(), "magic");
  add("version-1", "version", B().header(0, 0, 1), "version");
  add("version-big-endian", "version", B().header(0, 0, 0x03000000), "big-endian");
  add("truncated-header", "truncation", [] { B b; b.header(0, 0); b.v.resize(12); return b; }(), "n_tensors");
  add("value-type-unknown", "value type", B().header(0, 1).str("k").u32(13).u32(0), "type");
  add("array-elem-type-unknown", "value type", B().header(0, 1).str("k").u32(9).u32(99).u64(1).u32(0), "type");
  add("array-too-long", "array length", B().header(0, 1).str("k").u32(9).u32(4).u64(1000).u32(1), "length");
  add("array-nested-too-deep", "array depth", [] {
        B b; b.header(0, 1).str("k");
        b.u32(9);
        for (int d = 0; d < 8; ++d) b.u32(9).u64(1);
        b.u32(4).u64(0);
        return b; }(), "depth");
  add("bool-not-0-or-1", "bool", B().header(0, 1).str("k").u32(7).put<uint8_t>(7), "bool");
  add("key-empty", "key", B().header(0, 1).str("").u32(4).u32(1), "empty");
  add("key-duplicate", "duplicate key", B().header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2), "duplicate");
  add("alignment-zero", "alignment", B().header(0, 1).kv_u32("general.alignment", 0), "alignment");
  add("alignment-not-pow2", "alignment", B().header(0, 1).kv_u32("general.alignment", 48), "alignment");
  add("alignment-wrong-type", "alignment", B().header(0, 1).str("general.alignment").u32(8).str("32"), "alignment");
  add("tensor-dim-zero", "dimension", B().header(1, 0).tensor("t", {4, 0}, F32, 0).pad_to(32).zeros(32), "ne[1]");
  add("tensor-n-dims-zero", "dimension", B().header(1, 0).str("t").u32(0).u32(F32).u64(0).pad_to(32), "n_dims");
  add("tensor-type-unknown", "type id", B().header(1, 0).tensor("t", {32}, 4, 0).pad_to(32).zeros(128), "type");
  add("tensor-type-huge", "type id", B().header(1, 0).tensor("t", {32}, 0xFFFFFFFF, 0).pad_to(32).zeros(128), "type");
  add("tensor-block-misfit", "block size", B().header(1, 0).tensor("t", {33}, Q4_0, 0).pad_to(32).zeros(64), "block size");
  add("tensor-offset-misaligned", "alignment", B().header(1, 0).tensor("t", {4}, F32, 4).pad_to(32).zeros(32), "alignment");
  add("tensor-past-end", "data range", B().header(1, 0).tensor("t", {64}, F32, 0).pad_to(32).zeros(100), "past the end");
  add("tensor-overlap", "data range",
      B().header(2, 0).tensor("a", {16}, F32, 0).tensor("b", {16}, F32, 32).pad_to(32).zeros(128), "overlap");
  add("tensor-duplicate-name", "duplicate tensor",
      B().header(2, 0).tensor("a", {8}, F32, 0).tensor("a", {8}, F32, 32).pad_to(32).zeros(64), "duplicate");
  add("tensor-name-empty", "name", B().header(1, 0).tensor("", {8}, F32, 0).pad_to(32).zeros(32), "name");
  add("data-section-missing", "data range", B().header(1, 0).tensor("t", {8}, F32, 0), "");
  return c;
}

std::vector<std::pair<std::string, std::vector<uint8_t>>> valid_corpus() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  for (uint32_t version : {2u, 3u}) {
    gguf::Writer w(version, version == 2 ? 32 : 64);
    w.set_str("general.architecture", "llama");
    w.set_u32("llama.block_count", 2);
    w.set_u8("k.u8", 200); w.set_i8("k.i8", -100); w.set_u16("k.u16", 60000); w.set_i16("k.i16", -30000);
    w.set_i32("k.i32", -7); w.set_u64("k.u64", 1ull << 40); w.set_i64("k.i64", -(1ll << 40));
    w.set_f32("k.f32", 0.5f); w.set_f64("k.f64", 0.25); w.set_bool("k.bool", true);
    w.set_arr_str("tokenizer.ggml.tokens", {"<s>", "</s>", "hello", "w\xc3\xb6rld"});
    w.set_arr_i32("tokenizer.ggml.token_type", {3, 3, 1, 1});
    w.set_arr_f32("tokenizer.ggml.scores", {0.f, 0.f, -1.f, -2.f});
    std::vector<float> a(64), b(32 * 4);
    for (size_t k = 0; k < a.size(); ++k) a[k] = static_cast<float>(k) * 0.25f;
    for (size_t k = 0; k < b.size(); ++k) b[k] = -static_cast<float>(k);
    (void)w.add_tensor_f32("a", {64}, a);
    (void)w.add_tensor_f32("b", {32, 4}, b);
    std::vector<uint8_t> q(18 * 2, 0x11);
    (void)w.add_tensor("q", gguf::GgmlType::Q4_0, {64}, q);
    out.emplace_back("valid-v" + std::to_string(version), w.to_bytes());
  }
  return out;
}

}  // namespace ggflow::testing
