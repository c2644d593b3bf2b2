#include <gtest/gtest.h>

#include "require_file.h"

#include <filesystem>

#include "corpus.h"
#include <fstream>
#include <numeric>
#include <unistd.h>

#include "gguf/bytes.h"
#include "gguf/dequant.h"
#include "gguf/file.h"
#include "gguf/writer.h"

using namespace ggflow::gguf;
namespace fs = std::filesystem;

namespace {
File parse_ok(const std::vector<uint8_t>& b) {
  auto f = File::parse(b);
  EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().str());
  return std::move(f).value();
}
}  // namespace

TEST(Writer, RoundTripsEveryValueTypeInV2AndV3) {
  for (const auto& [name, bytes] : ggflow::testing::valid_corpus()) {
    SCOPED_TRACE(name);
    File f = parse_ok(bytes);
    EXPECT_EQ(f.version(), name == "valid-v2" ? 2u : 3u);
    EXPECT_EQ(f.alignment(), name == "valid-v2" ? 32u : 64u);
    EXPECT_EQ(f.data_offset() % f.alignment(), 0u);
    EXPECT_EQ(f.architecture(), "llama");
    EXPECT_EQ(*f.get<uint32_t>("llama.block_count"), 2u);
    EXPECT_EQ(*f.get<uint8_t>("k.u8"), 200);
    EXPECT_EQ(*f.get<int8_t>("k.i8"), -100);
    EXPECT_EQ(*f.get<uint16_t>("k.u16"), 60000);
    EXPECT_EQ(*f.get<int16_t>("k.i16"), -30000);
    EXPECT_EQ(*f.get<int32_t>("k.i32"), -7);
    EXPECT_EQ(*f.get<uint64_t>("k.u64"), 1ull << 40);
    EXPECT_EQ(*f.get<int64_t>("k.i64"), -(1ll << 40));
    EXPECT_EQ(*f.get<float>("k.f32"), 0.5f);
    EXPECT_EQ(*f.get<double>("k.f64"), 0.25);
    EXPECT_EQ(*f.get<bool>("k.bool"), true);
    auto toks = f.get<std::vector<std::string>>("tokenizer.ggml.tokens");
    ASSERT_TRUE(toks.ok());
    EXPECT_EQ(*toks, (std::vector<std::string>{"<s>", "</s>", "hello", "w\xc3\xb6rld"}));
    EXPECT_EQ(*f.get<std::vector<int32_t>>("tokenizer.ggml.token_type"), (std::vector<int32_t>{3, 3, 1, 1}));
    EXPECT_EQ(*f.get<std::vector<float>>("tokenizer.ggml.scores"), (std::vector<float>{0, 0, -1, -2}));

    ASSERT_EQ(f.tensors().size(), 3u);
    const TensorInfo* b = f.find_tensor("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->ne, (std::vector<uint64_t>{32, 4}));
    EXPECT_EQ(b->type, GgmlType::F32);
    EXPECT_EQ(b->n_elements, 128u);
    EXPECT_EQ(b->offset % f.alignment(), 0u);
    std::vector<float> vals(128);
    ASSERT_TRUE(dequantize(b->type, f.tensor_data(*b), 128, vals.data()).ok());
    EXPECT_EQ(vals[5], -5.f);
    const TensorInfo* q = f.find_tensor("q");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->n_bytes, 36u);
    ASSERT_TRUE(dequantize(q->type, f.tensor_data(*q), 64, vals.data()).ok());
    EXPECT_EQ(vals[0], f16_to_f32(0x1111) * -7.0f);  // d = f16 0x1111, nibble 1 - 8 = -7
  }
}

TEST(Writer, WritesAFileThatOpensByPath) {
  const auto path = fs::temp_directory_path() / "ggflow-writer-test.gguf";
  Writer w;
  w.set_str("general.architecture", "test");
  std::vector<float> x = {1, 2, 3, 4};
  ASSERT_TRUE(w.add_tensor_f32("x", {4}, x).ok());
  EXPECT_FALSE(w.add_tensor_f32("x", {4}, x).ok()) << "duplicate names are refused";
  EXPECT_FALSE(w.add_tensor_f32("y", {5}, x).ok()) << "size mismatch is refused";
  ASSERT_TRUE(w.write(path.string()).ok());
  auto f = File::open(path.string());
  ASSERT_TRUE(f.ok()) << f.error().str();
  EXPECT_EQ(f->architecture(), "test");
  auto data = f->tensor_data(*f->find_tensor("x"));
  EXPECT_EQ(std::memcmp(data.data(), x.data(), 16), 0);
  fs::remove(path);
}

// Releasing the pages of a mapped file keeps its bytes (they fault in again from the file); any
// memory that is not a live mapping is refused untouched.
TEST(MappedBytes, ReleasingPagesKeepsTheBytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<uint8_t> pattern(4 * page);
  std::iota(pattern.begin(), pattern.end(), uint8_t{7});
  const auto path = std::filesystem::temp_directory_path() / ("ggflow_release_" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(pattern.data()), pattern.size());
  auto m = MappedBytes::map(path.string());
  ASSERT_TRUE(m.ok()) << m.error().str();
  const uint8_t* p = (*m)->span().data();
  ASSERT_EQ(std::memcmp(p, pattern.data(), pattern.size()), 0);
  EXPECT_TRUE(release_file_pages(p + 100, 3 * page));
  EXPECT_TRUE(release_file_pages(p, pattern.size()));
  EXPECT_EQ(std::memcmp(p, pattern.data(), pattern.size()), 0);
  EXPECT_FALSE(release_file_pages(p + page, 4 * page));  // runs past the mapping
  std::vector<uint8_t> heap = pattern;
  EXPECT_FALSE(release_file_pages(heap.data(), heap.size()));
  EXPECT_EQ(heap, pattern);
  const uint8_t* gone = p;
  m->reset();  // unmapped: no longer a live mapping
  EXPECT_FALSE(release_file_pages(gone, page));
  std::filesystem::remove(path);
}

TEST(Accessors, ErrorsNameTheKeyAndTheProblem) {
  File f = parse_ok(ggflow::testing::valid_corpus()[1].second);
  auto missing = f.get<uint32_t>("llama.nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().what.find("'llama.nope' is missing"), std::string::npos);
  auto wrong = f.get<std::string>("llama.block_count");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().what.find("has type u32, expected string"), std::string::npos) << wrong.error().what;
  auto range = f.get<uint8_t>("k.u16");
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.error().what.find("does not fit"), std::string::npos);
  auto neg = f.get<uint32_t>("k.i32");
  EXPECT_FALSE(neg.ok()) << "a negative value does not convert to unsigned";
  EXPECT_EQ(*f.get<int64_t>("llama.block_count"), 2) << "integers widen";
  EXPECT_EQ(*f.get<double>("k.f32"), 0.5) << "floats widen";
  EXPECT_FALSE(f.get<float>("k.i32").ok()) << "integers do not silently become floats";
  EXPECT_FALSE(f.get<std::vector<int32_t>>("tokenizer.ggml.tokens").ok());
}

TEST(Types, TableMatchesGgmlBlockGeometry) {
  struct Row { const char* name; uint32_t id, block, size; };
  // From GGML's type_traits (the gguf package's GGML_QUANT_SIZES prints the same).
  const Row rows[] = {{"F32", 0, 1, 4},      {"F16", 1, 1, 2},       {"Q4_0", 2, 32, 18},    {"Q4_1", 3, 32, 20},
                      {"Q5_0", 6, 32, 22},    {"Q5_1", 7, 32, 24},    {"Q8_0", 8, 32, 34},    {"Q8_1", 9, 32, 40},
                      {"Q2_K", 10, 256, 84},  {"Q3_K", 11, 256, 110}, {"Q4_K", 12, 256, 144}, {"Q5_K", 13, 256, 176},
                      {"Q6_K", 14, 256, 210}, {"Q8_K", 15, 256, 292}, {"IQ2_XXS", 16, 256, 66}, {"IQ2_XS", 17, 256, 74},
                      {"IQ3_XXS", 18, 256, 98}, {"IQ1_S", 19, 256, 50}, {"IQ4_NL", 20, 32, 18}, {"IQ3_S", 21, 256, 110},
                      {"IQ2_S", 22, 256, 82}, {"IQ4_XS", 23, 256, 136}, {"I8", 24, 1, 1},   {"I16", 25, 1, 2},
                      {"I32", 26, 1, 4},      {"I64", 27, 1, 8},      {"F64", 28, 1, 8},      {"IQ1_M", 29, 256, 56},
                      {"BF16", 30, 1, 2},     {"TQ1_0", 34, 256, 54}, {"TQ2_0", 35, 256, 66}, {"MXFP4", 39, 32, 17}};
  for (const auto& r : rows) {
    const TypeTraits* t = type_traits(r.id);
    ASSERT_NE(t, nullptr) << r.name;
    EXPECT_EQ(t->name, r.name);
    EXPECT_EQ(t->block_size, r.block) << r.name;
    EXPECT_EQ(t->type_size, r.size) << r.name;
    EXPECT_EQ(type_from_name(r.name), t->type);
  }
  EXPECT_EQ(type_traits(4), nullptr);
  EXPECT_EQ(type_traits(5), nullptr);
  EXPECT_EQ(type_traits(1000), nullptr);
}

TEST(Half, ConversionRoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (f != f) continue;  // NaN payloads are not preserved bit for bit
    EXPECT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(65520.f), 0x7C00) << "rounds to inf";
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3C00) << "ties go to even";
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3C02) << "ties go to even";
  EXPECT_EQ(f16_to_f32(0x0001), 5.9604644775390625e-08f) << "smallest subnormal";
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.5f)), 1.5f);
}

TEST(Dequant, RefusesWhatItCannotDo) {
  std::vector<uint8_t> b(64);
  float out[64];
  EXPECT_FALSE(dequantize(GgmlType::IQ2_XXS, b, 256, out).ok());
  EXPECT_FALSE(dequantize(GgmlType::Q4_0, b, 33, out).ok()) << "not a whole block";
  EXPECT_FALSE(dequantize(GgmlType::Q4_0, std::span(b.data(), 10), 32, out).ok()) << "too few bytes";
}

// The real and shared files: read and described (the inspect facts of issue #2).
namespace {
bool have(const fs::path& p, std::string* why) {
  if (fs::exists(p)) return true;
  fs::path missing = p;
  missing += ".missing";
  *why = fs::exists(missing) ? "model not available: see " + missing.string() : p.string() + " not found (run scripts/setup.sh)";
  return false;
}
}  // namespace

TEST(RealModels, SmolLM2Hyperparameters) {
  const fs::path p = fs::path(GGFLOW_ROOT) / "models/smollm2-135m-instruct-q4_1.gguf";
  std::string why;
  if (!have(p, &why)) {
    if (ggflow::testing::models_required()) FAIL() << why;
    GTEST_SKIP() << why;
  }
  auto f = File::open(p.string());
  ASSERT_TRUE(f.ok()) << f.error().str();
  EXPECT_EQ(f->architecture(), "llama");
  EXPECT_EQ(*f->get<uint32_t>("llama.block_count"), 30u);
  EXPECT_EQ(*f->get<uint32_t>("llama.attention.head_count"), 9u);
  EXPECT_EQ(*f->get<uint32_t>("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(*f->get<uint32_t>("llama.embedding_length"), 576u);
  EXPECT_EQ(f->get<std::vector<std::string>>("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(f->tensors().size(), 272u);
}

TEST(RealModels, Gemma3IsGemma3) {
  const fs::path p = fs::path(GGFLOW_ROOT) / "models/gemma3-270m-q4_k_m.gguf";
  std::string why;
  if (!have(p, &why)) {
    if (ggflow::testing::models_required()) FAIL() << why;
    GTEST_SKIP() << why;
  }
  auto f = File::open(p.string());
  ASSERT_TRUE(f.ok()) << f.error().str();
  EXPECT_EQ(f->architecture(), "gemma3");
  EXPECT_EQ(f->get<std::vector<std::string>>("tokenizer.ggml.tokens")->size(), 262144u);
}

TEST(SharedFiles, EveryModelAndVocabularyIsRead) {
  const fs::path shared(GGFLOW_SHARED);
  GGFLOW_REQUIRE_FILE(shared, ::ggflow::testing::cat(shared, " not found"));
  int n = 0;
  for (const auto& dir : {shared / "models", shared / "data/tokenizer"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".gguf") continue;
      auto f = File::open(e.path().string());
      ASSERT_TRUE(f.ok()) << f.error().str();
      EXPECT_TRUE(f->has("tokenizer.ggml.model")) << e.path();
      ++n;
    }
  }
  EXPECT_GE(n, 10);
}
