// The executor's plan fusions (cpu/executor_fusions.cpp) apply where the plan summary says and
// change no bit: SmolLM2's paged model compiled with them and without (GGFLOW_PLAN_FUSION=0) gives
// the same logits by memcmp for a prefill chunk of 24 tokens and 8 sequences decoding together,
// on every SIMD ISA this CPU has. With them, 59 of the 60 residual adds run in the epilogue of the
// matmul before them (the last layer's attention add reads the output-row selection's rows, not
// the matmul's) and, on packed weights, the 60 RMSNorms before the Q/K/V and gate/up groups
// quantize their rows for them and the Q/K/V groups apply 58 of the 60 RoPEs in their epilogue.
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
  Result<std::unique_ptr<CompiledModel>> cm = m ? compile(std::move(*m), CompileOptions{.executor = Executor::cpu, .threads = 2})
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

TEST(PlanFusions, SmolLM2SameBitsWithAndWithout) {
  GGFLOW_REQUIRE_FILE(kSmol, ::ggflow::testing::cat(kSmol, " is missing (run scripts/setup.sh)"));
  auto f = ModelFile::open(kSmol);
  ASSERT_TRUE(f.ok()) << f.error().str();
  for (cpu::Isa isa : cpu::supported_isas()) {
    if (isa == cpu::Isa::scalar) continue;  // the twin's 135M model: minutes; the kernels' tests cover it
    auto with = run(**f, isa, true), without = run(**f, isa, false);
    ASSERT_TRUE(with.ok()) << with.error().str();
    ASSERT_TRUE(without.ok()) << without.error().str();
    EXPECT_NE(with->plan.find("59 adding the residual in their epilogue"), std::string::npos) << with->plan;
    // prequantization feeds packed matmuls only (AVX-512 here; AVX2 reads the GGUF layout)
    const bool packed = cpu::packed_supports(isa, gguf::GgmlType::Q4_1);
    EXPECT_NE(with->plan.find(packed ? "60 quantizing for the matmuls after them" : " 0 quantizing for the matmuls after them"),
              std::string::npos)
        << with->plan;
    // the RoPE of every layer's Q and K but the first's (whose positions are computed after its group)
    EXPECT_NE(with->plan.find(packed ? " 58 applying the RoPE" : " 0 applying the RoPE"), std::string::npos) << with->plan;
    EXPECT_NE(without->plan.find(" 0 adding the residual"), std::string::npos) << without->plan;
    EXPECT_NE(without->plan.find(" 0 applying the RoPE"), std::string::npos) << without->plan;
    EXPECT_NE(without->plan.find(" 0 quantizing for the matmuls after them"), std::string::npos) << without->plan;
    ASSERT_EQ(with->logits.size(), without->logits.size());
    ASSERT_EQ(with->logits.size(), static_cast<size_t>(1 + 3 * 8) * 49152u);
    EXPECT_EQ(std::memcmp(with->logits.data(), without->logits.data(), with->logits.size() * sizeof(float)), 0)
        << cpu::to_string(isa) << ": the fused plan's logits differ";
  }
}

}  // namespace
}  // namespace ggflow::runtime
