// Statistics of the md workload's NVE samples: block averages (Flyvbjerg &
// Petersen, J. Chem. Phys. 91, 461 (1989): the standard error of a mean of
// correlated samples from the scatter of the means of long blocks) and the
// energy drift (least-squares slope). Pure functions.
#pragma once
#include <cstdint>
#include <vector>

namespace crucible::sim::md {

struct BlockMean {
  double mean = 0;
  double se = 0;   // standard error of the mean from `blocks` block means (0 if < 2)
  int blocks = 0;
};

// v: samples in time order. Uses the first blocks * floor(n / blocks) of them.
BlockMean block_mean(const std::vector<double>& v, int blocks);

// Least-squares slope of y against t (0 for fewer than 2 points).
double slope(const std::vector<double>& t, const std::vector<double>& y);

}  // namespace crucible::sim::md
