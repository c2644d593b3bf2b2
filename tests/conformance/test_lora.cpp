// LoRA adapters (builder/lora.h): llama.cpp's GGUF adapters on SmolLM2-135M, applied unmerged.
//
// The adapters are synthetic (python/make_lora_adapters.py, run by set-up: numpy with fixed
// seeds): a = rank 8, alpha 16, F32, on every layer's q, k, v, o, gate, up, down; b = rank 4, no
// alpha, F16, on q and v. The goldens (goldens/lora-smollm2-{a,b,a-half}.json) are llama.cpp's
// logits and greedy continuation with the adapter loaded (python/make_lora_goldens.py, through
// llama-cpp-python's lora_path / lora_scale). Checked here:
//  - each golden row against ggflow's raw runner on the CPU executor, with the bounds of the base
//    model (kCpuQuant: NMSE < 5e-3, top-1 except at llama.cpp near ties), and the greedy
//    continuation on every layout (raw, SDPA, paged) equal to llama.cpp's up to a near tie; the
//    adapter must change the base model's continuation (the golden's base_greedy);
//  - raw = SDPA = paged by memcmp with an adapter on;
//  - adapters loaded but not selected give the base model's bits (a token with factor 0 adds 0);
//  - one paged batch mixing sequences with adapter a, none, b and a+b: every row has the bits of
//    the same sequence run alone;
//  - adapter files that do not fit are refused with the reason.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "builder/lora.h"
#include "conformance/golden_check.h"
#include "gguf/writer.h"
#include "require_file.h"
#include "runtime/greedy.h"
#include "runtime/paged_runner.h"
#include "runtime/sequence_runner.h"

namespace ggflow {
namespace {

using nlohmann::json;
using transforms::Layout;

const std::string kRoot = GGFLOW_ROOT;
const std::string kBase = kRoot + "/models/smollm2-135m-instruct-q4_1.gguf";
const std::string kA = kRoot + "/models/smollm2-lora-a.gguf";
const std::string kB = kRoot + "/models/smollm2-lora-b.gguf";

json load(const std::string& name) {
  std::ifstream in(kRoot + "/tests/conformance/goldens/lora-smollm2-" + name + ".json");
  return json::parse(in);
}

#define REQUIRE_LORA_FILES()                                                                              \
  GGFLOW_REQUIRE_FILE(kBase, kBase + " is missing (`make models` links it)");                            \
  GGFLOW_REQUIRE_FILE(kA, kA + " is missing (set-up writes it: python/make_lora_adapters.py)");          \
  GGFLOW_REQUIRE_FILE(kB, kB + " is missing (set-up writes it: python/make_lora_adapters.py)")

std::vector<int32_t> prompt_of(const json& g) {
  auto t = g["tokens"].get<std::vector<int32_t>>();
  t.resize(g["n_prompt"].get<size_t>());
  return t;
}

// The golden's rows (teacher forcing) and its greedy continuation on each layout.
void check_adapter_golden(const std::string& name) {
  REQUIRE_LORA_FILES();
  const json g = load(name);
  const std::vector<runtime::LoraSpec> loras = {{kRoot + "/" + g["adapter"].get<std::string>(), g["scale"].get<float>()}};
  conformance::check_golden(g, kBase, conformance::kCpuQuant, runtime::Executor::cpu, {}, loras);

  const auto want = g["greedy"].get<std::vector<int32_t>>();
  const auto margins = g["greedy_margins"].get<std::vector<double>>();
  ASSERT_NE(want, g["base_greedy"].get<std::vector<int32_t>>()) << "the golden's adapter does not change the output";
  auto file = runtime::ModelFile::open(kBase, {}, loras);
  ASSERT_TRUE(file) << file.error().str();
  for (Layout layout : {Layout::raw, Layout::sdpa, Layout::paged}) {
    auto r = runtime::open_sequence_runner(**file, layout);
    ASSERT_TRUE(r) << r.error().str();
    ASSERT_TRUE((*r)->set_lora(1));
    auto got = runtime::generate_greedy(**r, prompt_of(g), static_cast<int>(want.size()));
    ASSERT_TRUE(got) << got.error().str();
    size_t same = 0;
    while (same < want.size() && (*got)[same] == want[same]) ++same;
    std::printf("lora %s on %s: greedy equal to llama.cpp's for %zu/%zu tokens\n", name.c_str(), transforms::to_string(layout), same,
                want.size());
    if (same < want.size()) {
      EXPECT_LT(margins[same], conformance::kCpuTieEps) << name << " on " << transforms::to_string(layout) << ": greedy token " << same
                                                        << " is " << (*got)[same] << ", llama.cpp chose " << want[same];
    }
    // without the adapter, the same runner gives the base model's continuation
    (*r)->reset();
    ASSERT_TRUE((*r)->set_lora(0));
    auto base = runtime::generate_greedy(**r, prompt_of(g), static_cast<int>(want.size()));
    ASSERT_TRUE(base) << base.error().str();
    EXPECT_EQ(*base, g["base_greedy"].get<std::vector<int32_t>>()) << transforms::to_string(layout);
  }
}

TEST(LoraConformance, AdapterA) { check_adapter_golden("a"); }
TEST(LoraConformance, AdapterB) { check_adapter_golden("b"); }
TEST(LoraConformance, AdapterAHalfScale) { check_adapter_golden("a-half"); }

// The logits of the prompt then 8 greedy steps, one row per step, with adapter mask `lora`.
std::vector<std::vector<float>> rows(runtime::SequenceRunner& r, std::span<const int32_t> prompt, uint64_t lora) {
  std::vector<std::vector<float>> out;
  r.reset();
  EXPECT_TRUE(r.set_lora(lora));
  auto l = r.step(prompt);
  for (int i = 0; l && i < 9; ++i) {
    out.emplace_back(l->begin(), l->end());
    const int32_t next = runtime::argmax(*l);
    l = r.step(std::span<const int32_t>(&next, 1));
  }
  EXPECT_TRUE(l) << l.error().str();
  return out;
}

bool same_bits(const std::vector<std::vector<float>>& x, const std::vector<std::vector<float>>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].size() != y[i].size() || std::memcmp(x[i].data(), y[i].data(), x[i].size() * sizeof(float)) != 0) return false;
  return true;
}

// raw = SDPA = paged with adapters a and b on; and with both loaded but none selected, the bits of
// the model opened without adapters.
TEST(LoraConformance, LayoutsIdenticalAndUnselectedIsBase) {
  REQUIRE_LORA_FILES();
  const auto prompt = prompt_of(load("a"));
  const std::vector<runtime::LoraSpec> loras = {{kA, 1.0f}, {kB, 0.7f}};
  auto with = runtime::ModelFile::open(kBase, {}, loras);
  ASSERT_TRUE(with) << with.error().str();
  auto plain = runtime::ModelFile::open(kBase);
  ASSERT_TRUE(plain) << plain.error().str();
  std::vector<std::vector<float>> first;
  for (Layout layout : {Layout::raw, Layout::sdpa, Layout::paged}) {
    auto r = runtime::open_sequence_runner(**with, layout);
    ASSERT_TRUE(r) << r.error().str();
    auto both = rows(**r, prompt, 3);
    if (first.empty()) {
      first = both;
    } else {
      EXPECT_TRUE(same_bits(first, both)) << transforms::to_string(layout) << " differs from raw with adapters a + b";
    }
    EXPECT_FALSE(same_bits(both, rows(**r, prompt, 1))) << "adapter b changed nothing";
    auto none = rows(**r, prompt, 0);
    auto p = runtime::open_sequence_runner(**plain, layout);
    ASSERT_TRUE(p) << p.error().str();
    EXPECT_TRUE(same_bits(none, rows(**p, prompt, 0))) << transforms::to_string(layout) << ": adapters loaded, none selected, is not the base model";
    EXPECT_FALSE((*r)->set_lora(4)) << "a mask naming a third adapter is accepted";
  }
}

// One paged batch of four sequences with adapters a, none, b, a+b (prefill chunks, then decode
// steps together): each logits row equals the row of its sequence run alone.
TEST(LoraConformance, MixedAdaptersInOneBatch) {
  REQUIRE_LORA_FILES();
  const auto prompt = prompt_of(load("a"));
  auto file = runtime::ModelFile::open(kBase, {}, std::vector<runtime::LoraSpec>{{kA, 1.0f}, {kB, 1.0f}});
  ASSERT_TRUE(file) << file.error().str();
  const uint64_t masks[4] = {1, 0, 2, 3};
  auto batch = runtime::PagedRunner::create(**file, 64);
  ASSERT_TRUE(batch) << batch.error().str();
  std::vector<std::vector<int32_t>> next(4);
  std::vector<std::vector<std::vector<float>>> batched(4);
  std::vector<int> seq(4);
  for (int s = 0; s < 4; ++s) seq[s] = (*batch)->add_sequence(), next[s] = std::vector<int32_t>(prompt.begin(), prompt.end() - s);
  for (int step = 0; step < 6; ++step) {
    std::vector<runtime::PagedRunner::Chunk> chunks;
    for (int s = 0; s < 4; ++s) chunks.push_back({seq[s], next[s], masks[s]});
    auto out = (*batch)->step(chunks);
    ASSERT_TRUE(out) << out.error().str();
    for (int s = 0; s < 4; ++s) {
      auto row = out->row(s);
      batched[s].emplace_back(row.begin(), row.end());
      next[s] = {runtime::argmax(row)};
    }
  }
  for (int s = 0; s < 4; ++s) {
    auto alone = runtime::open_sequence_runner(**file, Layout::paged);
    ASSERT_TRUE(alone) << alone.error().str();
    ASSERT_TRUE((*alone)->set_lora(masks[s]));
    std::vector<int32_t> in(prompt.begin(), prompt.end() - s);
    for (int step = 0; step < 6; ++step) {
      auto l = (*alone)->step(in);
      ASSERT_TRUE(l) << l.error().str();
      ASSERT_EQ(l->size(), batched[s][step].size());
      EXPECT_EQ(0, std::memcmp(l->data(), batched[s][step].data(), l->size() * sizeof(float)))
          << "sequence " << s << " (adapter mask " << masks[s] << ") step " << step << ": batched differs from alone";
      in = {runtime::argmax(*l)};
    }
  }
}

// Adapter files that do not fit SmolLM2, written with gguf::Writer: each refusal names the cause.
TEST(LoraAdapterFile, Refusals) {
  GGFLOW_REQUIRE_FILE(kBase, kBase + " is missing (`make models` links it)");
  auto base = gguf::File::open(kBase);
  ASSERT_TRUE(base) << base.error().str();
  const std::string dir = ::testing::TempDir();
  struct Pair {
    std::string weight;
    uint64_t a0, a1, b0, b1;
  };
  auto write = [&](const std::string& name, const std::string& type, const std::string& arch, std::vector<Pair> pairs,
                   std::vector<std::string> extra = {}) {
    gguf::Writer w;
    w.set_str("general.architecture", arch);
    if (!type.empty()) w.set_str("general.type", type);
    w.set_str("adapter.type", "lora");
    w.set_f32("adapter.lora.alpha", 16.0f);
    for (const auto& p : pairs) {
      if (p.a0) {
        EXPECT_TRUE(w.add_tensor_f32(p.weight + ".lora_a", {p.a0, p.a1}, std::vector<float>(p.a0 * p.a1, 0.01f)));
      }
      if (p.b0) {
        EXPECT_TRUE(w.add_tensor_f32(p.weight + ".lora_b", {p.b0, p.b1}, std::vector<float>(p.b0 * p.b1, 0.01f)));
      }
    }
    for (const auto& t : extra) EXPECT_TRUE(w.add_tensor_f32(t, {4}, std::vector<float>(4, 1.0f)));
    const std::string path = dir + "/lora-" + name + ".gguf";
    EXPECT_TRUE(w.write(path));
    return path;
  };
  const std::string q = "blk.0.attn_q.weight";  // [576, 576]
  struct Case {
    std::string path, want;
  } cases[] = {
      {write("model", "model", "llama", {{q, 576, 8, 8, 576}}), "general.type is 'model', not 'adapter'"},
      {write("arch", "adapter", "qwen2", {{q, 576, 8, 8, 576}}), "architecture 'qwen2', the model is 'llama'"},
      {write("shape", "adapter", "llama", {{q, 512, 8, 8, 576}}), "its lora_a is [512, 8]"},
      {write("rank", "adapter", "llama", {{q, 576, 8, 4, 576}}), "disagree on the rank"},
      {write("half", "adapter", "llama", {{q, 576, 8, 0, 0}}), ".lora_a but no .lora_b"},
      {write("unknown", "adapter", "llama", {{"blk.99.attn_q.weight", 576, 8, 8, 576}}), "which the model does not have"},
      {write("embd", "adapter", "llama", {{"token_embd.weight", 576, 8, 8, 49152}}), "token embedding"},
      {write("ranks", "adapter", "llama", {{q, 576, 8, 8, 576}, {"blk.0.attn_v.weight", 576, 4, 4, 192}}), "ranks 8 and 4"},
      {write("other", "adapter", "llama", {{q, 576, 8, 8, 576}}, {"blk.0.attn_norm.weight"}), "not a .lora_a or .lora_b tensor"},
  };
  for (const auto& c : cases) {
    auto a = builder::open_lora(c.path, *base);
    ASSERT_FALSE(a) << c.path << " was accepted";
    EXPECT_NE(a.error().str().find(c.want), std::string::npos) << a.error().str();
    auto m = runtime::ModelFile::open(kBase, {}, std::vector<runtime::LoraSpec>{{c.path, 1.0f}});
    EXPECT_FALSE(m) << c.path;
  }
  EXPECT_TRUE(builder::open_lora(write("good", "adapter", "llama", {{q, 576, 8, 8, 576}}), *base));
  EXPECT_FALSE(builder::open_lora(dir + "/no-such-adapter.gguf", *base));
}

TEST(LoraAdapterFile, ParseSpec) {
  auto s = runtime::parse_lora_spec("a.gguf:0.5");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->path, "a.gguf");
  EXPECT_EQ(s->scale, 0.5f);
  s = runtime::parse_lora_spec("dir:x/a.gguf");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->path, "dir:x/a.gguf");
  EXPECT_EQ(s->scale, 1.0f);
  EXPECT_FALSE(runtime::parse_lora_spec(":0.5"));
  EXPECT_FALSE(runtime::parse_lora_spec("a.gguf:inf"));
}

}  // namespace
}  // namespace ggflow
