// What the interconnect probe's two files share (profile/probe_interconnect.cc:
// the collectives; profile/probe_pingpong.cc: every pair's ping-pong). Internal
// to the probe; the schema is probe_interconnect.h's.
#pragma once
#include <cstddef>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/status.h"
#include "profile/probe_interconnect.h"

namespace crucible::profile::interconnect {

constexpr size_t kMiB = size_t{1} << 20;

// What quick and full mode spend.
struct Mode {
  size_t max_bytes;
  size_t size_factor;
  double loop_s;        // target length of one timed loop of a collective
  int max_iters;        // calls per loop at most (small sizes)
  int latency_trips;    // timed 8-byte round trips per pair
  int bandwidth_trips;  // timed large round trips per pair
};

inline Mode mode_for(const InterconnectOptions& o) {
  Mode m = o.quick ? Mode{16 * kMiB, 8, 0.01, 50, 200, 3} : Mode{256 * kMiB, 4, 0.05, 200, 1000, 5};
  if (o.max_bytes != 0) m.max_bytes = o.max_bytes;
  return m;
}

// v := n zeros (touching every page). An allocation failure is an error, not
// an exception crossing the module boundary.
template <typename T>
Status allocate(std::vector<T>& v, size_t n, const char* what) {
  try {
    v.assign(n, T{});
  } catch (const std::bad_alloc&) {
    return Status::invalid("[profile] interconnect: cannot allocate the " + std::string(what) +
                           " buffer (" + std::to_string(n * sizeof(T)) +
                           " bytes); lower max_bytes");
  }
  return Status::ok();
}

// Latency and bandwidth of every pair of ranks, one pair at a time, each
// message checked (probe_interconnect.h, "pingpong"). Collective.
Result<nlohmann::json> probe_pingpong(comm::Comm& comm, const Mode& mode,
                                      const InterconnectOptions& opt);

}  // namespace crucible::profile::interconnect
