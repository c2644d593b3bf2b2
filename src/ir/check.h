// Internal invariants (programming errors, never bad input): print and abort.
// Bad input (a malformed graph, a wrong shape) is reported through Error values instead.
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
