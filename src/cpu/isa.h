// Instruction-set dispatch. Every kernel exists as a scalar twin (the specification of its bits)
// and, where written, AVX2+FMA and AVX-512 (F/BW/VL/DQ, VNNI, BF16) versions that reproduce the
// twin bit for bit. The ISA is chosen once at start-up from the CPU's features; the environment
// variable GGFLOW_ISA=scalar|avx2|avx512 forces one (tests run every path this CPU supports).
#pragma once

#include <string_view>
#include <vector>

#include "base/result.h"

namespace ggflow::cpu {

enum class Isa { scalar, avx2, avx512 };

std::string_view to_string(Isa isa);
Result<Isa> isa_from_string(std::string_view s);   // "scalar", "avx2", "avx512"
bool isa_supported(Isa isa);                       // this CPU can run it
std::vector<Isa> supported_isas();                 // scalar first, then wider
Isa best_isa();                                    // the widest supported
// GGFLOW_ISA when set (an error names a bad or unsupported value), else best_isa().
Result<Isa> isa_from_env();

}  // namespace ggflow::cpu
