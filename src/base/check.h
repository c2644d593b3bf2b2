// GGFLOW_CHECK: internal invariants of every layer (programming errors, never bad input): print
// where and abort. Bad input (files, graphs, requests) is reported through Error values instead.
#pragma once

#include <cstdio>
#include <cstdlib>

#define GGFLOW_CHECK(cond, msg)                                                        \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: internal check failed: %s (%s)\n", __FILE__, __LINE__, \
                   #cond, static_cast<const char*>(msg));                              \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)
