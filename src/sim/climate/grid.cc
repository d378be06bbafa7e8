#include "sim/climate/grid.h"

#include <cmath>

namespace crucible::sim::climate {

Grid::Grid(int n) : nlat(n), nlon(2 * n) {
  dlat = kPi / nlat;
  dlon = dlat;
  lat.resize(nlat);
  cos_lat.resize(nlat);
  sin_lat.resize(nlat);
  area.resize(nlat);
  cos_edge.resize(nlat + 1);
  for (int j = 0; j <= nlat; ++j) cos_edge[j] = std::cos(-kPi / 2 + j * dlat);
  cos_edge[0] = cos_edge[nlat] = 0.0;  // the poles, exactly
  for (int j = 0; j < nlat; ++j) {
    lat[j] = -kPi / 2 + (j + 0.5) * dlat;
    cos_lat[j] = std::cos(lat[j]);
    sin_lat[j] = std::sin(lat[j]);
    // The exact spherical area of the cell: a^2 dlon (sin(north) - sin(south)).
    area[j] =
        kRadius * kRadius * dlon * (std::sin(lat[j] + dlat / 2) - std::sin(lat[j] - dlat / 2));
  }
  lon.resize(nlon);
  for (int i = 0; i < nlon; ++i) lon[i] = (i + 0.5) * dlon;
}

double Grid::lat_deg(int j) const { return -90.0 + (j + 0.5) * 180.0 / nlat; }
double Grid::lon_deg(int i) const { return (i + 0.5) * 180.0 / nlat; }

std::vector<Band> split_rows(const std::vector<double>& row_cost, int size) {
  const int n = int(row_cost.size());
  double total = 0;
  for (double c : row_cost) total += c;
  std::vector<Band> bands(size);
  int j = 0;
  double done = 0;
  for (int r = 0; r < size; ++r) {
    bands[r].j0 = j;
    const double target = total * (r + 1) / size;
    // At least one row; leave one for each later rank; stop at the row
    // whose end is closer to the target than its start.
    int end = j + 1;
    done += row_cost[j];
    while (end < n - (size - 1 - r) && done + row_cost[end] / 2 <= target) done += row_cost[end++];
    if (r == size - 1) end = n;
    bands[r].j1 = j = end;
  }
  return bands;
}

}  // namespace crucible::sim::climate
