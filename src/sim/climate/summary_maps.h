// The report's height maps: snapshots of h (or of the free surface h + hs
// where there is a mountain) as {"time_h", "nlat", "nlon", "lat0", "dlat",
// "lon0", "dlon", "field", "units", "values"}, values row-major south to
// north, block-averaged (area-weighted) by the smallest factor that divides
// the grid into at most 72 x 144 blocks, rounded to 0.1 m to keep
// results.json small. Pure functions; thread-safe.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "sim/climate/grid.h"

namespace crucible::sim::climate {

struct MapSource {
  double time_h = 0;
  size_t snapshot = 0;  // index into the snapshot buffer
};

// Up to four snapshot indices spread over [0, count): first, last, and two between.
std::vector<size_t> map_snapshot_indices(size_t count);

// snapshots: (count, 3 [h u v], nlat, nlon); hs: (nlat, nlon) or null.
nlohmann::json height_maps(const Grid& g, const std::vector<double>& snapshots,
                           const std::vector<MapSource>& maps, const std::vector<double>* hs);

}  // namespace crucible::sim::climate
