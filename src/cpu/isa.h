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

// AMX (Intel's tile unit: AMX-TILE + AMX-INT8) is not an ISA level of its own: the AVX-512 path
// hands it the integer dot products of K-quant prompt GEMMs (16 tokens and more) when the CPU has
// it and Linux grants this process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM). Integer sums
// are exact in any order, so the bits are the twin's either way. GGFLOW_AMX=0 turns it off.
bool amx_supported();            // CPU flags and the kernel's permission (asked once)
bool amx_enabled();              // supported, and not turned off
void set_amx_enabled(bool on);   // tests run both paths; no effect where not supported

}  // namespace ggflow::cpu
