// crucible probe, throttling section: every thread runs an FMA loop flat out
// for a while, and every ~50 ms each thread times a burst of FMAs (its FLOP
// rate) and a dependent imul chain (3 cycles per imul: its clock; profile/cpu_peak.h).
// A chip that throttles under sustained load — power or thermal limits, a
// noisy neighbour on a VM — shows a lower rate in the last second than in the
// first; training runs for hours at the last second's speed.
//
// JSON ("throttle"):
//   seconds, threads, threshold (the drop that is flagged)
//   windows: [{t_s (window end), gflops (all threads), clock_ghz: [per thread]}],
//            0.5 s windows
//   first_gflops, last_gflops: mean over the first and the last second
//   first_clock_ghz, last_clock_ghz: mean over threads, same seconds
//   drop: 1 - last_gflops / first_gflops; clock_drop likewise
//   throttling: drop > threshold
//   valid: samples from every thread in both seconds, all finite
//   power_w, power_source: the packages' mean power over the load (RAPL,
//   profile/energy.h), or power_unmeasured: why it could not be read
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace crucible::profile {

struct ThrottleOptions {
  bool quick = false;
  double seconds = 0;       // 0: 20 (quick: 3)
  double threshold = 0.05;  // flag a drop of more than 5%
};

nlohmann::json probe_throttle(const ThrottleOptions& opt);
std::string throttle_table(const nlohmann::json& j);

// From per-thread samples (t_s, gflops, clock_ghz): windows, first/last
// second, drop and flag. Pure; exposed for tests.
struct ThrottleSample {
  double t_s, gflops, clock_ghz;
};
nlohmann::json summarize_throttle(const std::vector<std::vector<ThrottleSample>>& per_thread,
                                  double seconds, double threshold);

}  // namespace crucible::profile
