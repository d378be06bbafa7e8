// The latitude-longitude grid of the shallow-water model and its split into
// latitude bands over ranks.
//
// Cells: nlat rows x nlon = 2*nlat columns of equal angular size
// (d = pi/nlat radians). Row j (0 = southernmost) has its centre at latitude
// -pi/2 + (j + 1/2) d, its edges at -pi/2 + j d and -pi/2 + (j+1) d; column i
// has its centre at longitude (i + 1/2) d. No cell centre lies on a pole; the
// polar edges have length 0 (cos_edge[0] = cos_edge[nlat] = 0 exactly), so no
// mass crosses them.
//
// Units: radians, metres, seconds. Immutable after construction; thread-safe.
#pragma once
#include <vector>

namespace crucible::sim::climate {

// Williamson et al. (1992), section 2: the Earth's radius, rotation rate and
// gravity every test case uses.
inline constexpr double kRadius = 6.37122e6;  // m
inline constexpr double kOmega = 7.292e-5;    // 1/s
inline constexpr double kGravity = 9.80616;   // m/s^2
inline constexpr double kPi = 3.14159265358979323846;

struct Grid {
  explicit Grid(int nlat);
  int nlat = 0, nlon = 0;
  double dlat = 0, dlon = 0;                  // radians (equal)
  std::vector<double> lat, cos_lat, sin_lat;  // (nlat) cell centres
  std::vector<double> cos_edge;               // (nlat + 1) row edges, south to north
  std::vector<double> area;                   // (nlat) m^2 of one cell of row j
  std::vector<double> lon;                    // (nlon) cell centres
  double lat_deg(int j) const;
  double lon_deg(int i) const;
};

// Rows [j0, j1) of one rank.
struct Band {
  int j0 = 0, j1 = 0;
  int rows() const { return j1 - j0; }
};
// Splits rows 0..row_cost.size() into `size` consecutive bands (rank r the
// r-th, south to north) of near-equal total cost, each of at least one row
// (needs size <= rows). Deterministic: every rank computes the same split.
std::vector<Band> split_rows(const std::vector<double>& row_cost, int size);

}  // namespace crucible::sim::climate
