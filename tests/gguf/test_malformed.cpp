// Every malformed file is refused with an error naming what broke; nothing crashes or reads out
// of bounds (run under ASan/UBSan by scripts/fuzz.sh, which replays this corpus).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "corpus.h"
#include "gguf/file.h"

using ggflow::gguf::File;

TEST(Malformed, EveryCaseIsRefusedWithAFieldName) {
  const auto corpus = ggflow::testing::malformed_corpus();
  ASSERT_GE(corpus.size(), 30u);
  for (const auto& c : corpus) {
    auto f = File::parse(c.bytes);
    ASSERT_FALSE(f.ok()) << c.name << " (" << c.cls << ") was accepted";
    const std::string msg = f.error().str();
    EXPECT_NE(msg.find(c.must_mention), std::string::npos) << c.name << ": " << msg;
    EXPECT_FALSE(msg.empty());
  }
}

TEST(Malformed, CveClassesAreAllCovered) {
  std::set<std::string> classes;
  for (const auto& c : ggflow::testing::malformed_corpus()) classes.insert(c.cls);
  for (const char* cve : {"CVE-2024-21802", "CVE-2024-21825", "CVE-2024-21836", "CVE-2024-23496",
                          "CVE-2024-23605", "CVE-2025-53630", "CVE-2026-27940", "CVE-2026-33298"})
    EXPECT_TRUE(classes.count(cve)) << cve;
}

TEST(Malformed, ErrorsGiveByteOffsets) {
  for (const auto& c : ggflow::testing::malformed_corpus()) {
    auto f = File::parse(c.bytes);
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.error().what.find("byte offset"), std::string::npos) << c.name << ": " << f.error().what;
  }
}

// Cutting a valid file at every byte must give an error, never a crash or a bogus success.
TEST(Malformed, EveryTruncationOfAValidFileIsRefused) {
  for (const auto& [name, bytes] : ggflow::testing::valid_corpus()) {
    ASSERT_TRUE(File::parse(bytes).ok()) << name;
    for (size_t n = 0; n + 1 < bytes.size(); ++n) {
      auto f = File::parse(std::span(bytes.data(), n));
      // Only the zero padding after the last tensor may go; everything before it is needed.
      if (f.ok()) {
        uint64_t end = 0;
        for (const auto& t : f->tensors()) end = std::max(end, f->data_offset() + t.offset + t.n_bytes);
        EXPECT_GE(n, end) << name << " cut at " << n;
        EXPECT_EQ(f->tensors().size(), 3u) << name << " cut at " << n;
      }
    }
  }
}

// Flipping bytes of a valid file gives either a valid file or a clean error.
TEST(Malformed, ByteFlipsNeverCrash) {
  for (const auto& [name, bytes] : ggflow::testing::valid_corpus()) {
    for (size_t k = 0; k < bytes.size(); ++k) {
      for (uint8_t x : {uint8_t{0xFF}, uint8_t{0x80}, uint8_t{0x01}}) {
        auto copy = bytes;
        copy[k] ^= x;
        auto f = File::parse(copy);
        if (!f.ok()) {
          EXPECT_FALSE(f.error().what.empty());
        }
      }
    }
  }
}

TEST(Malformed, LimitsAreConfigurable) {
  const auto bytes = ggflow::testing::valid_corpus()[0].second;
  ggflow::gguf::ParseLimits lim;
  lim.max_array = 2;  // the vocabulary has 4 entries
  auto f = File::parse(bytes, lim);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().what.find("maximum array length"), std::string::npos) << f.error().what;
}
