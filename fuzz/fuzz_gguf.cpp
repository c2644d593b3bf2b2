// libFuzzer target for the GGUF reader: parse arbitrary bytes; a refusal must be an Error with a
// message; when they parse, touch every metadata value, every tensor's data range and dequantize
// the small tensors. Built and run by scripts/fuzz.sh under AddressSanitizer (with
// LeakSanitizer) and UndefinedBehaviorSanitizer. fuzz_gguf_graph goes on to build the model.
// Seeds: the malformed-file corpus (tests/gguf/corpus.cpp), the tiny models of write_seeds.cpp,
// three shared vocabularies, fuzz/regressions/fuzz_gguf/.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "gguf/dequant.h"
#include "gguf/file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ggflow::gguf;
  ParseLimits lim;
  lim.max_array = 1u << 20;  // keep single inputs cheap; the limits themselves are unit-tested
  auto f = File::parse({data, size}, lim);
  if (!f) {
    FUZZ_CHECK(!f.error().what.empty(), "parse error without a message");
    return 0;
  }
  size_t sink = 0;
  for (const auto& kv : f->metadata()) {
    sink += kv.value.to_string(4).size();
    sink += f->get<std::vector<std::string>>(kv.key).ok();
    sink += f->get<int64_t>(kv.key).ok();
  }
  std::vector<float> out;
  for (const auto& t : f->tensors()) {
    auto bytes = f->tensor_data(t);
    if (!bytes.empty()) sink += bytes[0] + bytes[bytes.size() - 1];
    if (can_dequantize(t.type) && t.n_elements <= (1u << 16)) {
      out.resize(t.n_elements);
      sink += dequantize(t.type, bytes, t.n_elements, out.data()).ok();
    }
  }
  static volatile size_t g_sink;
  g_sink = sink;
  return 0;
}
