// Statistics of the md workload's NVE samples: block averages (Flyvbjerg &
// Petersen, J. Chem. Phys. 91, 461 (1989): the standard error of a mean of
// correlated samples from the scatter of the means of long blocks) and the
// energy drift (least-squares slope), and the summary of a run's NVE samples
// against the Johnson-Zollweg-Gubbins equation of state. Pure functions.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace crucible::sim::md {

struct BlockMean {
  double mean = 0;
  double se = 0;  // standard error of the mean from `blocks` block means (0 if < 2)
  int blocks = 0;
};

// v: samples in time order. Uses the first blocks * floor(n / blocks) of them.
BlockMean block_mean(const std::vector<double>& v, int blocks);

// Least-squares slope of y against t (0 for fewer than 2 points).
double slope(const std::vector<double>& t, const std::vector<double>& y);

// One NVE sample: step, T, P, U/N (tail included), E/N.
inline constexpr int kSampleWidth = 5;

// Means with block errors (10 blocks) of T, P and U/N; the EOS at (density,
// mean T), its difference to the means and the error of that difference
// (sigma: the block error with the error of the mean T carried through the
// EOS's slope in T); the energy drift per atom per step (slope of E/N) and
// the largest deviation of E/N from its first NVE value.
nlohmann::json nve_summary(const std::vector<double>& samples, double density);

}  // namespace crucible::sim::md
