// Op conformance, in the manner of llama.cpp's test-backend-ops: every GGML op of the frontend's
// vocabulary, over several shapes and element types (block-quantized weights for MUL_MAT and
// GET_ROWS), goes through its translator and the IR reference evaluator and is compared with an
// independent oracle: python/op_oracle.py (numpy in float64 from GGML's definitions, the gguf
// package for dequantization), run at test time with .venv's python.
//
// Inputs are generated deterministically here (fixed seed) and handed to the oracle as
// cases.json + data.bin. A case passes when NMSE = Σ(out − exp)² / Σ exp² < 1e-7 (the
// test-backend-ops default). Prints one line per case and "N passed, N failed".
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "frontend/translate.h"
#include "gguf/dequant.h"
#include "ir/evaluator.h"

namespace ggflow::frontend {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using T = GgmlType;

struct Case {
  std::string name;
  GgmlGraph g;
  std::map<int, std::shared_ptr<std::vector<uint8_t>>> data;  // leaf id -> bytes
};

class Gen {
 public:
  std::mt19937 rng{1234};
  float uni(float lo = -1.0f, float hi = 1.0f) { return std::uniform_real_distribution<float>(lo, hi)(rng); }
  int64_t upto(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng); }

  static int64_t numel(const Ne& ne) { return ne[0].n * ne[1].n * ne[2].n * ne[3].n; }

  // Bytes for a tensor of type t: uniform values for floats, valid block data for block types
  // (random quants, f16 scales set to small sane values).
  std::vector<uint8_t> bytes(T t, const Ne& ne, float lo = -1.0f, float hi = 1.0f) {
    int64_t n = numel(ne);
    const auto& tr = gguf::traits(t);
    std::vector<uint8_t> b;
    if (t == T::F32) {
      b.resize(n * 4);
      for (int64_t i = 0; i < n; ++i) { float v = uni(lo, hi); std::memcpy(&b[i * 4], &v, 4); }
    } else if (t == T::F16) {
      b.resize(n * 2);
      for (int64_t i = 0; i < n; ++i) { uint16_t h = gguf::f32_to_f16(uni(lo, hi)); std::memcpy(&b[i * 2], &h, 2); }
    } else {
      int64_t blocks = n / tr.block_size;
      b.resize(blocks * tr.type_size);
      for (auto& x : b) x = static_cast<uint8_t>(upto(256));
      std::vector<size_t> f16_at;  // offsets of the f16 scale fields in a block
      switch (t) {
        case T::Q4_0: case T::Q5_0: case T::Q8_0: f16_at = {0}; break;
        case T::Q4_1: case T::Q5_1: case T::Q4_K: case T::Q5_K: f16_at = {0, 2}; break;
        case T::Q6_K: f16_at = {208}; break;
        default: break;
      }
      for (int64_t k = 0; k < blocks; ++k)
        for (size_t off : f16_at) {
          uint16_t h = gguf::f32_to_f16(uni(0.002f, 0.05f));
          std::memcpy(&b[k * tr.type_size + off], &h, 2);
        }
    }
    return b;
  }
};

// Leaves of a case.
int input(Case& c, Gen& gen, const std::string& name, T t, Ne ne, float lo = -1.0f, float hi = 1.0f) {
  int id = c.g.input(name, t, ne);
  c.data[id] = std::make_shared<std::vector<uint8_t>>(gen.bytes(t, ne, lo, hi));
  return id;
}
int ints(Case& c, const std::string& name, T t, Ne ne, const std::vector<int64_t>& v) {
  int id = c.g.input(name, t, ne);
  auto b = std::make_shared<std::vector<uint8_t>>();
  for (int64_t x : v) {
    if (t == T::I32) { int32_t y = static_cast<int32_t>(x); b->insert(b->end(), (uint8_t*)&y, (uint8_t*)&y + 4); }
    else b->insert(b->end(), (uint8_t*)&x, (uint8_t*)&x + 8);
  }
  c.data[id] = b;
  return id;
}
int weight(Case& c, Gen& gen, const std::string& name, T t, Ne ne, int n_dims) {
  auto b = std::make_shared<std::vector<uint8_t>>(gen.bytes(t, ne));
  int id = c.g.weight(name, t, ne, n_dims, *b, b);
  c.data[id] = b;
  return id;
}
int mask(Case& c, int64_t kv, int64_t t) {  // causal: query i sees keys j <= kv - t + i
  int id = c.g.input("mask", T::F32, {kv, t, 1, 1});
  auto b = std::make_shared<std::vector<uint8_t>>(kv * t * 4);
  float* m = reinterpret_cast<float*>(b->data());
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < kv; ++j) m[i * kv + j] = j <= kv - t + i ? 0.0f : -std::numeric_limits<float>::infinity();
  c.data[id] = b;
  return id;
}

json params_json(const GgmlTensor& t) {
  return std::visit([](const auto& p) -> json {
    using P = std::decay_t<decltype(p)>;
    if constexpr (std::is_same_v<P, ScaleParams>) return {{"s", p.s}, {"b", p.b}};
    else if constexpr (std::is_same_v<P, NormParams>) return {{"eps", p.eps}};
    else if constexpr (std::is_same_v<P, RopeParams>)
      return {{"n_dims", p.n_dims}, {"mode", p.mode}, {"freq_base", p.freq_base}, {"freq_scale", p.freq_scale}, {"attn_factor", p.attn_factor}};
    else if constexpr (std::is_same_v<P, SoftMaxParams>) return {{"scale", p.scale}};
    else if constexpr (std::is_same_v<P, ViewParams>) return {{"nb", p.nb}, {"offset", p.offset}};
    else if constexpr (std::is_same_v<P, PermuteParams>) return {{"axes", p.axes}};
    else if constexpr (std::is_same_v<P, GluParams>) return {{"op", std::string(to_string(p.op))}, {"swapped", p.swapped}};
    else if constexpr (std::is_same_v<P, UnaryParams>) return {{"op", std::string(to_string(p.op))}};
    else if constexpr (std::is_same_v<P, FlashAttnParams>) return {{"scale", p.scale}};
    else if constexpr (std::is_same_v<P, ConcatParams>) return {{"dim", p.dim}};
    else return json::object();
  }, t.params);
}

std::vector<Case> make_cases() {
  std::vector<Case> cases;
  Gen gen;
  auto add = [&](std::string name, const std::function<int(Case&)>& body) {
    Case c;
    c.name = std::move(name);
    c.g.add_output("out", body(c));
    cases.push_back(std::move(c));
  };
  // GET_ROWS: weight tables of every type, an activation table, a batched table
  for (T t : {T::F32, T::F16, T::Q4_0, T::Q4_1, T::Q5_0, T::Q8_0, T::Q4_K, T::Q6_K}) {
    int64_t E = gguf::traits(t).block_size == 256 ? 256 : 64;
    add("GET_ROWS(type=" + std::string(gguf::traits(t).name) + ",E=" + std::to_string(E) + ",R=10,N=5)", [&, t, E](Case& c) {
      int w = weight(c, gen, "table", t, {E, 10, 1, 1}, 2);
      return c.g.get_rows(w, ints(c, "ids", T::I32, {5, 1, 1, 1}, {3, 0, 9, 3, 7}));
    });
  }
  add("GET_ROWS(activation [16,7],N=3)", [&](Case& c) {
    return c.g.get_rows(input(c, gen, "x", T::F32, {16, 7, 1, 1}), ints(c, "ids", T::I32, {3, 1, 1, 1}, {6, 2, 2}));
  });
  add("GET_ROWS(batched [8,5,3],N=2)", [&](Case& c) {
    return c.g.get_rows(input(c, gen, "x", T::F32, {8, 5, 3, 1}), ints(c, "ids", T::I32, {2, 3, 1, 1}, {4, 0, 1, 1, 3, 2}));
  });
  // MUL_MAT: weights of every type, activation x activation, GQA broadcast
  for (T t : {T::F32, T::F16, T::Q4_0, T::Q4_1, T::Q5_0, T::Q8_0, T::Q4_K, T::Q6_K})
    for (int64_t M : {1, 5}) {
      int64_t K = gguf::traits(t).block_size == 256 ? 256 : 64;
      add("MUL_MAT(type=" + std::string(gguf::traits(t).name) + ",K=" + std::to_string(K) + ",N=12,M=" + std::to_string(M) + ")",
          [&, t, K, M](Case& c) { return c.g.mul_mat(weight(c, gen, "w", t, {K, 12, 1, 1}, 2), input(c, gen, "x", T::F32, {K, M, 1, 1})); });
    }
  add("MUL_MAT(act [16,7,3] x [16,4,3])", [&](Case& c) {
    return c.g.mul_mat(input(c, gen, "a", T::F32, {16, 7, 3, 1}), input(c, gen, "b", T::F32, {16, 4, 3, 1}));
  });
  add("MUL_MAT(gqa [8,6,2] x [8,3,6])", [&](Case& c) {
    return c.g.mul_mat(input(c, gen, "k", T::F32, {8, 6, 2, 1}), input(c, gen, "q", T::F32, {8, 3, 6, 1}));
  });
  add("MUL_MAT(batch3 [8,5,1,2] x [8,3,2,2])", [&](Case& c) {
    return c.g.mul_mat(input(c, gen, "a", T::F32, {8, 5, 1, 2}), input(c, gen, "b", T::F32, {8, 3, 2, 2}));
  });
  // ADD / MUL: same shape, a vector (bias / norm weight), a broadcast, a whole-number repeat
  for (bool is_add : {true, false}) {
    std::string op = is_add ? "ADD" : "MUL";
    auto bin = [&, is_add](Case& c, int a, int b) { return is_add ? c.g.add(a, b) : c.g.mul(a, b); };
    add(op + "(same [10,4,3])", [&, bin](Case& c) { return bin(c, input(c, gen, "a", T::F32, {10, 4, 3, 1}), input(c, gen, "b", T::F32, {10, 4, 3, 1})); });
    add(op + "(vector [10,4] + [10])", [&, bin](Case& c) { return bin(c, input(c, gen, "a", T::F32, {10, 4, 1, 1}), weight(c, gen, "w", T::F32, {10, 1, 1, 1}, 1)); });
    add(op + "(broadcast [10,4,3] + [10,1,3])", [&, bin](Case& c) { return bin(c, input(c, gen, "a", T::F32, {10, 4, 3, 1}), input(c, gen, "b", T::F32, {10, 1, 3, 1})); });
    add(op + "(repeat [12,4] + [6,2])", [&, bin](Case& c) { return bin(c, input(c, gen, "a", T::F32, {12, 4, 1, 1}), input(c, gen, "b", T::F32, {6, 2, 1, 1})); });
  }
  add("SCALE(s=0.125)", [&](Case& c) { return c.g.scale(input(c, gen, "x", T::F32, {16, 5, 1, 1}), 0.125f); });
  add("SCALE(s=-2,b=0.5)", [&](Case& c) { return c.g.scale(input(c, gen, "x", T::F32, {7, 3, 2, 1}), -2.0f, 0.5f); });
  for (float eps : {1e-6f, 1e-2f}) {
    add("RMS_NORM(eps=" + std::to_string(eps) + ",[64,5,2])", [&, eps](Case& c) { return c.g.rms_norm(input(c, gen, "x", T::F32, {64, 5, 2, 1}), eps); });
    add("NORM(eps=" + std::to_string(eps) + ",[64,5,2])", [&, eps](Case& c) { return c.g.norm(input(c, gen, "x", T::F32, {64, 5, 2, 1}), eps); });
  }
  // ROPE: normal and neox, full and partial rotation, scaling, freq_factors
  struct R { int mode, n_dims; float base, scale; bool ff; };
  for (R r : {R{0, 16, 10000.0f, 1.0f, false}, R{2, 16, 10000.0f, 1.0f, false}, R{0, 8, 500000.0f, 0.25f, false},
              R{2, 8, 1000000.0f, 1.0f, false}, R{2, 16, 10000.0f, 1.0f, true}}) {
    add("ROPE(mode=" + std::to_string(r.mode) + ",n_dims=" + std::to_string(r.n_dims) + ",base=" + std::to_string(static_cast<int>(r.base)) +
            ",scale=" + std::to_string(r.scale) + (r.ff ? ",freq_factors" : "") + ",[16,3,5])",
        [&, r](Case& c) {
          int x = input(c, gen, "x", T::F32, {16, 3, 5, 1});
          int pos = ints(c, "pos", T::I32, {5, 1, 1, 1}, {0, 1, 7, 100, 2047});
          std::optional<int> ff;
          if (r.ff) ff = input(c, gen, "ff", T::F32, {r.n_dims / 2, 1, 1, 1}, 1.0f, 4.0f);
          RopeParams p;
          p.mode = r.mode, p.n_dims = r.n_dims, p.freq_base = r.base, p.freq_scale = r.scale;
          return c.g.rope(x, pos, ff, p);
        });
  }
  add("SOFT_MAX(scale=1,[9,4,2])", [&](Case& c) { return c.g.soft_max(input(c, gen, "x", T::F32, {9, 4, 2, 1}, -4.0f, 4.0f), std::nullopt, 1.0f); });
  add("SOFT_MAX(scale=0.3,mask,[7,4,3])", [&](Case& c) {
    return c.g.soft_max(input(c, gen, "x", T::F32, {7, 4, 3, 1}, -4.0f, 4.0f), mask(c, 7, 4), 0.3f);
  });
  // VIEW: contiguous reinterpretation, a row slice at an offset, a strided (transposing) view
  add("VIEW(contiguous [12,4] as [4,3,4])", [&](Case& c) {
    return c.g.view(input(c, gen, "x", T::F32, {12, 4, 1, 1}), {4, 3, 4, 1}, {4, 16, 48, 0}, 0);
  });
  add("VIEW(rows 2..4 of [6,5])", [&](Case& c) {
    return c.g.view(input(c, gen, "x", T::F32, {6, 5, 1, 1}), {6, 3, 1, 1}, {4, 24, 0, 0}, 2 * 24);
  });
  add("VIEW(strided [6,5] -> [5,6])", [&](Case& c) {
    return c.g.view(input(c, gen, "x", T::F32, {6, 5, 1, 1}), {5, 6, 1, 1}, {24, 4, 0, 0}, 0);
  });
  add("VIEW(f16 columns 1..3 of [4,3,2])", [&](Case& c) {
    return c.g.view(input(c, gen, "x", T::F16, {4, 3, 2, 1}), {3, 3, 2, 1}, {2, 8, 24, 0}, 2);
  });
  add("RESHAPE([12,4,2] -> [4,3,8])", [&](Case& c) { return c.g.reshape(input(c, gen, "x", T::F32, {12, 4, 2, 1}), {4, 3, 8, 1}); });
  add("RESHAPE([6,5] -> [30])", [&](Case& c) { return c.g.reshape(input(c, gen, "x", T::F32, {6, 5, 1, 1}), {30, 1, 1, 1}); });
  for (std::array<int, 4> ax : {std::array<int, 4>{0, 2, 1, 3}, {1, 0, 2, 3}, {2, 0, 1, 3}, {1, 2, 0, 3}, {3, 1, 0, 2}})
    add("PERMUTE(" + std::to_string(ax[0]) + std::to_string(ax[1]) + std::to_string(ax[2]) + std::to_string(ax[3]) + ",[5,4,3,2])",
        [&, ax](Case& c) { return c.g.permute(input(c, gen, "x", T::F32, {5, 4, 3, 2}), ax[0], ax[1], ax[2], ax[3]); });
  add("TRANSPOSE([5,4,3])", [&](Case& c) { return c.g.transpose(input(c, gen, "x", T::F32, {5, 4, 3, 1})); });
  add("CONT(PERMUTE(0213),[5,4,3])", [&](Case& c) { return c.g.cont(c.g.permute(input(c, gen, "x", T::F32, {5, 4, 3, 1}), 0, 2, 1, 3)); });
  add("CPY(f32 -> f16,[8,3])", [&](Case& c) { return c.g.cpy(input(c, gen, "x", T::F32, {8, 3, 1, 1}), input(c, gen, "d", T::F16, {8, 3, 1, 1})); });
  add("CPY(f32 [8,3] -> f32 [24])", [&](Case& c) { return c.g.cpy(input(c, gen, "x", T::F32, {8, 3, 1, 1}), input(c, gen, "d", T::F32, {24, 1, 1, 1})); });
  for (T it : {T::I64, T::I32})
    add(std::string("SET_ROWS(f32 [8,6] <- [8,3], ") + (it == T::I64 ? "i64" : "i32") + ")", [&, it](Case& c) {
      return c.g.set_rows(input(c, gen, "dst", T::F32, {8, 6, 1, 1}), input(c, gen, "rows", T::F32, {8, 3, 1, 1}),
                          ints(c, "idx", it, {3, 1, 1, 1}, {5, 0, 2}));
    });
  add("SET_ROWS(f16 [8,4] <- f32 [8,2])", [&](Case& c) {
    return c.g.set_rows(input(c, gen, "dst", T::F16, {8, 4, 1, 1}), input(c, gen, "rows", T::F32, {8, 2, 1, 1}),
                        ints(c, "idx", T::I64, {2, 1, 1, 1}, {3, 1}));
  });
  for (GgmlGlu g : {GgmlGlu::SWIGLU, GgmlGlu::GEGLU, GgmlGlu::GEGLU_ERF}) {
    add("GLU(" + std::string(to_string(g)) + ",split,[20,3])", [&, g](Case& c) {
      return c.g.glu_split(g, input(c, gen, "g", T::F32, {20, 3, 1, 1}, -3, 3), input(c, gen, "u", T::F32, {20, 3, 1, 1}));
    });
    for (bool sw : {false, true})
      add("GLU(" + std::string(to_string(g)) + ",fused" + (sw ? ",swapped" : "") + ",[20,3])", [&, g, sw](Case& c) {
        return c.g.glu(g, input(c, gen, "x", T::F32, {20, 3, 1, 1}, -3, 3), sw);
      });
  }
  for (GgmlUnary u : {GgmlUnary::SILU, GgmlUnary::GELU, GgmlUnary::GELU_ERF, GgmlUnary::TANH})
    add("UNARY(" + std::string(to_string(u)) + ",[33,4])", [&, u](Case& c) { return c.g.unary(u, input(c, gen, "x", T::F32, {33, 4, 1, 1}, -5, 5)); });
  struct A { int64_t D, T, KV, H, Hkv; bool m; float scale; };
  for (A a : {A{16, 1, 5, 4, 4, false, 0.25f}, A{16, 3, 7, 4, 2, true, 0.25f}, A{8, 4, 4, 6, 1, true, 1.0f}, A{32, 2, 9, 2, 2, true, 0.125f}})
    add("FLASH_ATTN_EXT(D=" + std::to_string(a.D) + ",T=" + std::to_string(a.T) + ",KV=" + std::to_string(a.KV) + ",H=" + std::to_string(a.H) +
            ",Hkv=" + std::to_string(a.Hkv) + (a.m ? ",mask" : "") + ")",
        [&, a](Case& c) {
          int q = input(c, gen, "q", T::F32, {a.D, a.T, a.H, 1}), k = input(c, gen, "k", T::F32, {a.D, a.KV, a.Hkv, 1});
          int v = input(c, gen, "v", T::F32, {a.D, a.KV, a.Hkv, 1});
          std::optional<int> m;
          if (a.m) m = mask(c, a.KV, a.T);
          return c.g.flash_attn_ext(q, k, v, m, a.scale);
        });
  for (int d = 0; d < 4; ++d)
    add("CONCAT(dim=" + std::to_string(d) + ",[4,3,2,2])", [&, d](Case& c) {
      Ne nb{4, 3, 2, 2};
      nb[d] = d == 0 ? 5 : 1;
      return c.g.concat(input(c, gen, "a", T::F32, {4, 3, 2, 2}), input(c, gen, "b", T::F32, nb), d);
    });
  return cases;
}

std::string fmt_nmse(double v) {
  char b[64];
  std::snprintf(b, sizeof b, " (NMSE %.2e)", v);
  return b;
}

TEST(OpConformance, EveryOpAgainstNumpy) {
  auto cases = make_cases();
  // 1. describe the cases for the oracle
  fs::path dir = fs::path(::testing::TempDir()) / ("ggflow_op_conformance_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  json all = json::array();
  std::ofstream blob(dir / "data.bin", std::ios::binary);
  size_t offset = 0;
  for (auto& c : cases) {
    ASSERT_TRUE(c.g.status()) << c.name << ": " << c.g.status().error().str();
    json nodes = json::array();
    for (const auto& t : c.g.tensors()) {
      json n{{"op", std::string(to_string(t.op))}, {"type", std::string(gguf::traits(t.type).name)},
             {"ne", {t.ne[0].n, t.ne[1].n, t.ne[2].n, t.ne[3].n}}, {"src", t.src}, {"params", params_json(t)}};
      if (t.leaf != LeafKind::none) {
        const auto& b = *c.data.at(t.id);
        blob.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
        n["offset"] = offset, n["nbytes"] = b.size();
        offset += b.size();
      }
      nodes.push_back(n);
    }
    all.push_back({{"name", c.name}, {"nodes", nodes}});
  }
  blob.close();
  std::ofstream(dir / "cases.json") << all.dump();
  // 2. the oracle
  std::string py = std::string(GGFLOW_ROOT) + "/.venv/bin/python";
  ASSERT_TRUE(fs::exists(py)) << py << " is missing: run scripts/setup.sh (it creates .venv with numpy and gguf)";
  std::string cmd = py + " " + GGFLOW_ROOT + "/python/op_oracle.py " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream exp_in(dir / "expected.bin", std::ios::binary);
  // 3. translate + evaluate + compare
  int passed = 0, failed = 0;
  for (auto& c : cases) {
    const auto& out = c.g.tensor(c.g.outputs()[0].id);
    size_t n = static_cast<size_t>(Gen::numel(out.ne));
    std::vector<float> expect(n);
    exp_in.read(reinterpret_cast<char*>(expect.data()), static_cast<std::streamsize>(n * 4));
    std::string why;
    double nmse = -1;
    auto m = translate(c.g);
    if (!m) {
      why = m.error().str();
    } else {
      std::vector<ir::Tensor> args;
      for (const auto& p : m->parameters()) {
        const GgmlTensor* t = c.g.find(p->name());
        const auto& b = *c.data.at(t->id);
        auto view = ir::Tensor::view(p->out_type(), p->out_shape().to_vector(), c.data.at(t->id), {b.data(), b.size()});
        if (!view) { why = view.error().str(); break; }
        args.push_back(*view);
      }
      if (why.empty()) {
        auto r = ir::evaluate(*m, args);
        if (!r) why = r.error().str();
        else {
          std::vector<float> got = (*r)[0].to_f32();
          if (got.size() != n) why = "output has " + std::to_string(got.size()) + " values, expected " + std::to_string(n);
          else {
            double num = 0, den = 0;
            for (size_t i = 0; i < n; ++i) num += (got[i] - expect[i]) * double(got[i] - expect[i]), den += double(expect[i]) * expect[i];
            nmse = den > 0 ? num / den : num;
            if (!(nmse < 1e-7)) why = "NMSE " + std::to_string(nmse) + " > 1e-7";
          }
        }
      }
    }
    bool ok = why.empty();
    (ok ? passed : failed)++;
    std::printf("  %-60s %s%s\n", c.name.c_str(), ok ? "OK" : "FAIL: ", ok ? fmt_nmse(nmse).c_str() : why.c_str());
    EXPECT_TRUE(ok) << c.name << ": " << why;
  }
  std::printf("%d/%d tests passed\n%d passed, %d failed\n", passed, passed + failed, passed, failed);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ggflow::frontend
