#include "sim/climate/summary_maps.h"

#include <cmath>

namespace crucible::sim::climate {

std::vector<size_t> map_snapshot_indices(size_t count) {
  std::vector<size_t> idx;
  if (count == 0) return idx;
  const size_t want = std::min<size_t>(count, 4);
  for (size_t k = 0; k < want; ++k) {
    const size_t i = want == 1 ? 0 : (k * (count - 1) + (want - 1) / 2) / (want - 1);
    if (idx.empty() || i > idx.back()) idx.push_back(i);
  }
  return idx;
}

nlohmann::json height_maps(const Grid& g, const std::vector<double>& snapshots,
                           const std::vector<MapSource>& maps, const std::vector<double>* hs) {
  int f = 1;  // nlon = 2 nlat, so nlat / f <= 72 bounds both
  while (g.nlat / f > 72 || g.nlat % f != 0) ++f;
  const int my = g.nlat / f, mx = g.nlon / f;
  const double d_deg = 180.0 / g.nlat;
  const size_t plane = size_t(g.nlat) * g.nlon;
  nlohmann::json out = nlohmann::json::array();
  for (const MapSource& m : maps) {
    const double* h = snapshots.data() + m.snapshot * 3 * plane;
    std::vector<double> values(size_t(my) * mx);
    for (int by = 0; by < my; ++by)
      for (int bx = 0; bx < mx; ++bx) {
        double sum = 0, area = 0;
        for (int j = by * f; j < (by + 1) * f; ++j)
          for (int i = bx * f; i < (bx + 1) * f; ++i) {
            const size_t c = size_t(j) * g.nlon + i;
            sum += g.area[j] * (h[c] + (hs ? (*hs)[c] : 0.0));
            area += g.area[j];
          }
        values[size_t(by) * mx + bx] = std::round(sum / area * 10) / 10;
      }
    out.push_back({{"time_h", m.time_h},
                   {"nlat", my},
                   {"nlon", mx},
                   {"lat0", -90.0 + f * d_deg / 2},
                   {"dlat", f * d_deg},
                   {"lon0", f * d_deg / 2},
                   {"dlon", f * d_deg},
                   {"field", hs ? "h+hs" : "h"},
                   {"units", "m"},
                   {"values", values}});
  }
  return out;
}

}  // namespace crucible::sim::climate
