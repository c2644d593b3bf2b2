// The malformed-GGUF regression corpus: one hand-built file per class of bug that other GGUF
// readers shipped (CVE-2024-21802/-21825/-21836/-23496/-23605, CVE-2025-53630, CVE-2026-27940,
// CVE-2026-33298), plus the other limits the reader enforces. Each case says which field the
// error must name. Used by test_malformed.cpp and written out as fuzzer seeds by gguf_corpus.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ggflow::testing {

struct MalformedCase {
  std::string name;            // file name in the corpus
  std::string cls;             // the CVE or limit it stands for
  std::vector<uint8_t> bytes;
  std::string must_mention;    // a substring the error message must contain
};

std::vector<MalformedCase> malformed_corpus();
// Small valid files (every value type, tensors of several types) for round trips and seeds.
std::vector<std::pair<std::string, std::vector<uint8_t>>> valid_corpus();

}  // namespace ggflow::testing
