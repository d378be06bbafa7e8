// How much of the CPUs other processes used while a probe section measured:
// /proc/stat's busy time over all CPUs (steal included: a hypervisor's
// neighbours count as load) less this process's own CPU time, over the wall
// time x the online CPUs. A section measured while others held a fifth of
// the machine or more says its figure is unreliable, instead of passing a
// neighbour's build off as this machine's speed.
// Not thread-safe; one watch per measured stretch.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

namespace crucible::profile {

// Above this share of the CPUs used by others, a figure is unreliable.
inline constexpr double kBusyShare = 0.2;

class LoadWatch {
 public:
  LoadWatch();  // starts watching
  // Others' share of the machine's CPUs since construction, in [0, 1]; NaN
  // where /proc/stat or the process times cannot be read.
  double others_share() const;
  // {"others_share": x, "reliable": x < kBusyShare} (others_share null when
  // unknown, reliable then true).
  nlohmann::json to_json() const;

 private:
  int64_t wall0_ns_;
  double busy0_s_, self0_s_;
};

}  // namespace crucible::profile
