// The one clock: monotonic nanoseconds, and a stopwatch built on it; a
// thread's CPU time; and the wall clock as text, for names and records.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace crucible {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The calling thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID):
// what a compute loop measures against to read the core's speed even while
// other processes take turns on it.
int64_t thread_cpu_ns();

class Stopwatch {
 public:
  Stopwatch() : start_(now_ns()) {}
  void reset() { start_ = now_ns(); }
  int64_t elapsed_ns() const { return now_ns() - start_; }
  double elapsed_ms() const { return elapsed_ns() * 1e-6; }
  double elapsed_s() const { return elapsed_ns() * 1e-9; }

 private:
  int64_t start_;
};

// The current wall-clock time through strftime's `format`, in UTC or local
// time: wall_time("%Y-%m-%dT%H:%M:%SZ", true) is ISO 8601 UTC.
std::string wall_time(const char* format, bool utc);

}  // namespace crucible
