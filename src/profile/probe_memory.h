// Memory bandwidth probe: the four STREAM kernels (McCalpin) on double arrays
// far larger than the last-level cache, on 1 thread and on all threads.
//
//   copy   c = a            2 arrays x 8 B x n counted per run
//   scale  b = s*c          2
//   add    c = a + b        3
//   triad  a = b + s*c      3
//
// Arrays start a=1, b=2, c=0 and every round runs the four kernels in order, so
// after k rounds each element has a value known in closed form;
// check_stream_arrays verifies every element against it (STREAM's
// checkSTREAMresults, made per element so one bad element is caught). The
// arrays are first touched by the same OpenMP static schedule that later runs
// the kernels, so pages sit near the threads that use them, and page faults
// (~14 us per 4 KiB page on VMs) stay out of the timings. The arrays are
// mapped like core/allocator's large blocks (2 MiB aligned, MADV_HUGEPAGE) and
// unmapped on return. Threads come from
// OpenMP, the one pool (num_threads() of core/threads.h is "all").
//
// probe_memory() returns probe.json's "memory" object:
//   array_bytes       bytes per array (3 arrays are allocated)
//   llc_bytes         last-level cache the threads can fill: the sum of the
//                     distinct highest-level cache instances in
//                     /sys/devices/system/cpu/cpu*/cache over the CPUs this
//                     process may run on; sysconf(_SC_LEVEL3_CACHE_SIZE) when
//                     sysfs says nothing. (glibc's sysconf reports the whole
//                     socket's L3 on some AMD guests, 8x what 2 vCPUs can use.)
//   repeats           rounds of the four kernels per thread count
//   huge_pages        true when the arrays were advised for transparent huge
//                     pages (MADV_HUGEPAGE, as core/allocator does for large
//                     tensors); whether the kernel granted them is its choice
//   threads_1, threads_all   one object each:
//     threads         OpenMP threads used
//     copy, scale, add, triad   one object each:
//       best_gbs      bytes counted as above / fastest round, GB/s (1e9 B/s)
//       avg_gbs       bytes / mean time of rounds 2..N (STREAM skips the
//                     first round), GB/s
//     valid           true when every element of a, b, c matched after the run
//     error           only when !valid: which array, index, value, expected
//   valid             threads_1.valid && threads_all.valid
//   error             only when !valid: the first error
// An allocation failure yields {"array_bytes", "llc_bytes", "valid": false, "error"}.
//
// Not thread-safe against concurrent calls (it uses every OpenMP thread).
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace crucible::profile {

struct MemoryOptions {
  bool quick = false;
  // Bytes per array; 0: max(4 x llc_bytes, 64 MiB), quick: max(4 x llc_bytes,
  // 32 MiB). Capped at physical memory / 8 so the three arrays fit comfortably.
  size_t array_bytes = 0;
  int repeats = 0;  // 0: 10, quick: 4. Clamped to [2, 100] (values grow 15x a round).
  // Seconds for the whole section (0: 60, quick: 4): past it each thread
  // count stops after 2 rounds at least (a busy VM took 54 s for the quick
  // section's 4 rounds). Each run records the "rounds" it did.
  double budget_s = 0;
};

nlohmann::json probe_memory(const MemoryOptions& options);

// A few aligned lines for the terminal: GB/s per kernel and thread count.
std::string memory_table(const nlohmann::json& memory);

// The last-level cache size as described for "llc_bytes" (0 if unknown).
size_t last_level_cache_bytes();

// STREAM's result check: after `iterations` rounds of copy/scale/add/triad
// from a=1, b=2, c=0 with `scalar`, every element of each array must equal the
// closed-form value within 1e-13 relative. The error (Status::corrupt) names
// the array, the first bad index, its value, the expected one and the relative
// error.
Status check_stream_arrays(const double* a, const double* b, const double* c, size_t n,
                           int iterations, double scalar);

}  // namespace crucible::profile
