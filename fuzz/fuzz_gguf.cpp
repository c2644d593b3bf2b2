// libFuzzer target for the GGUF reader: parse arbitrary bytes; when they parse, touch every
// metadata value, every tensor's data range and dequantize the small tensors. Built and run by
// scripts/fuzz.sh under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer.
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/dequant.h"
#include "gguf/file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ggflow::gguf;
  ParseLimits lim;
  lim.max_array = 1u << 20;  // keep single inputs cheap; the limits themselves are unit-tested
  auto f = File::parse({data, size}, lim);
  if (!f) return 0;
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
  return sink == 0xFFFFFFFF ? 1 : 0;
}
