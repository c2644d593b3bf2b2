// The executor's plan fusions (cpu/executor_fusions.cpp) apply where the plan summary says and
// change no bit: SmolLM2's paged model compiled with them and without (GGFLOW_PLAN_FUSION=0) gives
// the same logits by memcmp for a prefill chunk of 24 tokens and 8 sequences decoding together,
// on every SIMD ISA this CPU has. With them, 59 of the 60 residual adds run in the epilogue of the
// matmul before them (the last layer's attention add reads the output-row selection's rows, not
// the matmul's) and, on packed weights, the 60 RMSNorms before the Q/K/V and gate/up groups
// quantize their rows for them and the Q/K/V groups apply 58 of the 60 RoPEs in their epilogue.
// The same on the Q8_0 family models: Qwen2's biases, Llama 3's frequency factors, Phi-3's
// partial rotary.
#include <gtest/gtest.h>

#include "require_file.h"

#include <cstdlib>
#include <cstring>

#include "cpu/isa.h"
#include "cpu/kernels/matmul_packed.h"
#include "runtime/compiled_model.h"
#include "runtime/model_file.h"
#include "runtime/paged_step_inputs.h"

namespace ggflow::runtime {
namespace {

const std::string kSmol = std::string(GGFLOW_ROOT) + "/models/smollm2-135m-instruct-q4_1.gguf";

struct Run {
  std::string plan;
  std::vector<float> logits;  // every step's, one after the other
};

Result<Run> run(const ModelFile& f, cpu::Isa isa, bool fusion) {
  ::setenv("GGFLOW_ISA", std::string(cpu::to_string(isa)).c_str(), 1);  // read when the plan is compiled
  if (!fusion) ::setenv("GGFLOW_PLAN_FUSION", "0", 1);
  auto m = f.layout_model(transforms::Layout::paged);
  Result<std::unique_ptr<CompiledModel>> cm = m ? compile(std::move(*m), CompileOptions{.executor = Executor::cpu, .threads = 2, .pool = {}})
                                                : Result<std::unique_ptr<CompiledModel>>(m.error());
  ::unsetenv("GGFLOW_ISA");
  ::unsetenv("GGFLOW_PLAN_FUSION");
  if (!cm) return cm.error();
  if (auto st = (*cm)->resize_caches(8); !st) return st.error();
  Run r{(*cm)->plan_summary(), {}};
  PagedStepInputs in(**cm);
  // a prefill chunk of one sequence (24 rows: the parallel quantization), then 8 sequences x 3 steps
  struct Shape { int64_t seqs, pos, tokens; };
  for (const Shape& s : {Shape{1, 0, 24}, Shape{8, 0, 1}, Shape{8, 1, 1}, Shape{8, 2, 1}}) {
    if (auto st = in.step(s.seqs, s.pos, s.tokens); !st) return st.error();
    if (auto st = (*cm)->run(in.in); !st) return st.error();
    const ir::Tensor& logits = (*cm)->output(0);
    const float* p = reinterpret_cast<const float*>(logits.bytes());
    r.logits.insert(r.logits.end(), p, p + logits.nbytes() / sizeof(float));
  }
  return r;
}

// The fused and unfused plans of the model at `path` (matmul weights of wtype) on every SIMD ISA:
// the same logits by memcmp, and the summaries hold what is expected of the fused plan on an ISA
// with packed kernels for wtype (`packed`), on the others (`other`: no groups, so no RoPE in an
// epilogue), and of the unfused plan (`plain`).
using Expect = std::initializer_list<const char*>;
void check_same_bits(const std::string& path, gguf::GgmlType wtype, Expect packed, Expect other, Expect plain) {
  auto f = ModelFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().str();
  for (cpu::Isa isa : cpu::supported_isas()) {
    if (isa == cpu::Isa::scalar) continue;  // the twin's 135M model: minutes; the kernels' tests cover it
    auto fused = run(**f, isa, true), unfused = run(**f, isa, false);
    ASSERT_TRUE(fused.ok()) << fused.error().str();
    ASSERT_TRUE(unfused.ok()) << unfused.error().str();
    for (const char* w : cpu::packed_supports(isa, wtype) ? packed : other)
      EXPECT_NE(fused->plan.find(w), std::string::npos) << cpu::to_string(isa) << ": '" << w << "' in " << fused->plan;
    for (const char* w : plain) EXPECT_NE(unfused->plan.find(w), std::string::npos) << "'" << w << "' in " << unfused->plan;
    ASSERT_EQ(fused->logits.size(), unfused->logits.size());
    EXPECT_EQ(std::memcmp(fused->logits.data(), unfused->logits.data(), fused->logits.size() * sizeof(float)), 0)
        << path << ", " << cpu::to_string(isa) << ": the fused plan's logits differ";
  }
}

TEST(PlanFusions, SmolLM2SameBitsWithAndWithout) {
  GGFLOW_REQUIRE_FILE(kSmol, ::ggflow::testing::cat(kSmol, " is missing (run scripts/setup.sh)"));
  // 59 of the 60 residual adds (the last layer's attention add reads the output-row selection);
  // the RoPE of every layer's Q and K but the first's (its positions are computed after its group)
  check_same_bits(kSmol, gguf::GgmlType::Q4_1,
                  {"59 adding the residual in their epilogue", " 0 their bias", " 58 applying the RoPE",
                   "60 quantizing for the matmuls after them"},
                  {"59 adding the residual in their epilogue", " 0 applying the RoPE", " 0 quantizing for the matmuls"},
                  {" 0 adding the residual", " 0 their bias", " 0 applying the RoPE", " 0 quantizing for the matmuls"});
}

// Qwen2's Q/K/V biases, added by their group before the (NeoX) RoPE; Llama 3's RoPE with frequency
// factors; Phi-3's partial rotary (12 of 16 dims). Three layers each: layers 1 and 2 fuse the RoPE.
TEST(PlanFusions, FamiliesSameBitsWithAndWithout) {
  const std::string dir = GGFLOW_FAMILIES;
  const Expect plain = {" 0 adding the residual", " 0 their bias", " 0 applying the RoPE"};
  struct Case { const char* file; Expect packed, other; };
  for (const Case& c : {Case{"qwen2-q8_0.gguf", {" 9 their bias", " 4 applying the RoPE"}, {" 9 their bias", " 0 applying the RoPE"}},
                        Case{"llama3-q8_0.gguf", {" 0 their bias", " 4 applying the RoPE"}, {" 0 applying the RoPE"}},
                        Case{"phi3-q8_0.gguf", {" 4 applying the RoPE"}, {" 0 applying the RoPE"}}}) {
    const std::string path = dir + "/" + c.file;
    GGFLOW_REQUIRE_FILE(path, ::ggflow::testing::cat(path, " is missing (the family_models fixture writes it)"));
    check_same_bits(path, gguf::GgmlType::Q8_0, c.packed, c.other, plain);
  }
}

}  // namespace
}  // namespace ggflow::runtime
