// CRUCIBLE_CHECK: internal invariants. A failed check is a bug in crucible, not
// bad input: it aborts with the invariant, file and line. Bad input goes through
// Status (core/status.h) instead.
#pragma once
#include <cstdio>
#include <cstdlib>

namespace crucible::detail {
[[noreturn]] inline void check_failed(const char* cond, const char* msg, const char* file, int line) {
  std::fprintf(stderr, "[crucible] invariant failed: %s (%s) at %s:%d\n", msg, cond, file, line);
  std::fflush(stderr);
  std::abort();
}
}  // namespace crucible::detail

#define CRUCIBLE_CHECK(cond, msg)                                                   \
  do {                                                                              \
    if (__builtin_expect(!(cond), 0))                                               \
      ::crucible::detail::check_failed(#cond, msg, __FILE__, __LINE__);             \
  } while (0)
