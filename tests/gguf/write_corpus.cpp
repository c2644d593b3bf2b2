// gguf_corpus DIR: write the malformed and valid corpus as files (fuzzer seeds, manual checks).
#include <cstdio>
#include <fstream>

#include "corpus.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_corpus DIR\n");
    return 2;
  }
  auto write = [&](const std::string& name, const std::vector<uint8_t>& b) {
    std::ofstream(std::string(argv[1]) + "/" + name + ".gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  };
  for (const auto& c : ggflow::testing::malformed_corpus()) write(c.name, c.bytes);
  for (const auto& [name, b] : ggflow::testing::valid_corpus()) write(name, b);
  return 0;
}
