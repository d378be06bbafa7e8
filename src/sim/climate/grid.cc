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
    area[j] = kRadius * kRadius * dlon * (std::sin(lat[j] + dlat / 2) - std::sin(lat[j] - dlat / 2));
  }
  lon.resize(nlon);
  for (int i = 0; i < nlon; ++i) lon[i] = (i + 0.5) * dlon;
}

double Grid::lat_deg(int j) const { return -90.0 + (j + 0.5) * 180.0 / nlat; }
double Grid::lon_deg(int i) const { return (i + 0.5) * 180.0 / nlat; }

Band band_of(int nlat, int size, int rank) {
  const int base = nlat / size, extra = nlat % size;
  Band b;
  b.j0 = rank * base + (rank < extra ? rank : extra);
  b.j1 = b.j0 + base + (rank < extra ? 1 : 0);
  return b;
}

}  // namespace crucible::sim::climate
