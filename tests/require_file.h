// Tests that need a model or data file skip when it is missing (a developer without the models
// still runs the rest), except under GGFLOW_REQUIRE_MODELS=1, which CI sets (.ci/run): setup
// installs every model there, so a missing one is a failure, never a silent skip.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

namespace ggflow::testing {

inline bool models_required() {
  const char* v = std::getenv("GGFLOW_REQUIRE_MODELS");
  return v && std::string(v) == "1";
}

template <class... A>
std::string cat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}

}  // namespace ggflow::testing

// Skips the test (or fails it under GGFLOW_REQUIRE_MODELS=1) when `path` does not exist.
#define GGFLOW_REQUIRE_FILE(path, why)                                                                \
  do {                                                                                                \
    if (!std::filesystem::exists(path)) {                                                             \
      if (::ggflow::testing::models_required())                                                       \
        FAIL() << (why) << " (GGFLOW_REQUIRE_MODELS=1: scripts/setup.sh installs it; is setup broken?)"; \
      else                                                                                            \
        GTEST_SKIP() << (why);                                                                        \
    }                                                                                                 \
  } while (0)
